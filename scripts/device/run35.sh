# Session 6, call 2: (1) L2 stream hints in the one-pass kernel (rows evict_first, weight evict_last) at the large
# aligned shapes where the best peer leads by 1-4%; (2) joint_max for the dynamic FP8 ops up to 2048 rows, plain and
# fused; (3) the fp16 sweep of both ops beside the peers (issue 6's targets are for bf16 and fp16).
source scripts/device/setup.sh
set -o pipefail
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-aligned-stream.json --shapes aligned --focus --stream --budget 0.05 2>&1 | tail -10
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-aligned-stream-fused.json --shapes aligned --focus --stream --fused --budget 0.05 2>&1 | tail -10
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-joint.json --shapes joint --quant --focus --budget 0.05 2>&1 | tail -11
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-joint-fused.json --shapes joint --quant --focus --fused --budget 0.05 2>&1 | tail -11
for op in rmsnorm fused_add_rmsnorm; do
  timeout 110 ridgeline bench $op --shapes sweep --dtype fp16 --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_${op}_fp16_sweep.json > $OUT/${op}_fp16.log 2>&1; echo "$op fp16 rc=$?"; grep -i "geometric\|failures" $OUT/${op}_fp16.log | tail -3
done
