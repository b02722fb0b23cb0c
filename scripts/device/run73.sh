# Session 11, call 2: torch.compile's lead at the fused op's small rows of 4096 (16: 2.10 us in one run, 2.71-2.74
# in two others; 128: 2.56-2.59 vs ours 2.72). (1) Which config inductor's autotuner picks there and what it timed
# for each candidate. (2) Our candidates with every input set writing the same outputs, as the bench's out-of-place
# calls do (the explore has given each set its own outputs: stores to lines not in L2).
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 scripts/device/inductor_configs.py fused_add_rmsnorm 1x4096 16x4096 64x4096 128x4096 256x4096 1024x8192 4096x7168 > $OUT/inductor-fused.log 2>&1; echo "inductor fused rc=$?"
timeout 90 python3 scripts/device/inductor_configs.py rmsnorm 128x4096 4096x7168 16384x8192 > $OUT/inductor-plain.log 2>&1; echo "inductor plain rc=$?"
grep -v "^    \|^V\|^I\|^W" $OUT/inductor-fused.log | tail -3
timeout 90 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-small-shared.json --shapes fused-small --hoist --const-n --fused --shared-out --budget 0.05 2>&1 | tail -4
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-small-shared-all.json --shapes fused-small --hoist --fused --shared-out --budget 0.05 2>&1 | tail -4
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-small-own.json --shapes fused-small --const-n --hoist --fused --budget 0.05 2>&1 | tail -4
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k-1024-fused-shared.json --shapes w8k-1024 --hoist --const-n --fused --shared-out --budget 0.05 2>&1 | tail -2
grep -A3 "Benchmark all" $OUT/inductor-fused.log | head -60
echo done
