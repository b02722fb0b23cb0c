# Session 9, call 5. The fused op at 8192 columns with the hidden size compiled in (const_n changes no bit since
# session 8): call 1 measured it 1-5% faster graph-cold at 1-16384 rows (1024x8192 17.82 vs 18.78 us; torch.compile
# 17.62 in the sweep). Before a rule: (1) every row count graph-cold, (2) decode rows graph-hot (the plain op lost 14%
# at 1x8192 that way in session 8), (3) the fused op's small rows of 4096 columns, every candidate (torch.compile 2.10
# vs our 2.24 us at 16x4096).
source scripts/device/setup.sh
set -o pipefail
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k-rows-fused.json --shapes w8k-rows --const-n --fused --budget 0.1 2>&1 | tail -10
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-decode-fused-hot.json --shapes decode-lite --const-n --fused --regime graph-hot --budget 0.05 2>&1 | tail -9
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-small-fused.json --shapes w4k-small --fused --budget 0.05 2>&1 | tail -4
echo done
