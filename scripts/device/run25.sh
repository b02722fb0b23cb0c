# Session 5, call 1: session 4's unverified commits on the split path, the one-pass 32-warp candidates at 16K-32K
# columns, and the wide-row benches with the shipped configs.
source scripts/device/setup.sh
set -o pipefail
timeout 100 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=90 tests/test_gpu_split.py 2>&1 | tee $OUT/pytest-split.log | tail -3
timeout 110 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-lite.json --shapes wide-lite --focus --budget 0.06 2>&1 | tail -12
timeout 110 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-lite-fused.json --shapes wide-lite --focus --fused --budget 0.06 2>&1 | tail -12
W=2048x65536,4096x32768,512x131072,64x65536,1x65536
timeout 110 ridgeline bench rmsnorm --shapes $W --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_wide.json > $OUT/w.log 2>&1; echo "wide rc=$?"; tail -20 $OUT/w.log
timeout 110 ridgeline bench fused_add_rmsnorm --shapes $W --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_wide.json > $OUT/fw.log 2>&1; echo "fused wide rc=$?"; tail -20 $OUT/fw.log
