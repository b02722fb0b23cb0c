# Session 9 call 2 (next.sh, second half): hoisted fused graph-hot; plain 8192/16384 with N constant; decode rows of 8192 graph-hot.
source scripts/device/setup.sh
set -o pipefail
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-hoist-fused-hot.json --shapes hoist-lite --hoist --fused --regime graph-hot --budget 0.05 2>&1 | tail -11
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k16k.json --shapes w8k16k --const-n --budget 0.1 2>&1 | tail -16
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k-decode-hot.json --shapes w8k-decode --const-n --regime graph-hot --budget 0.05 2>&1 | tail -5
echo done
