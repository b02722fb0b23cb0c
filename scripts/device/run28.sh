# Session 5, call 4: rows of 16K-32K columns in one pass (shipped now), checked and benched beside the peers; the
# GPU tests of the kernels (the rest in call 5).
source scripts/device/setup.sh
set -o pipefail
S=4096x32768,1024x32768,128x32768,4096x24576,4096x20000,2048x16896,16x20000
timeout 120 ridgeline bench rmsnorm --shapes $S --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_w32k.json > $OUT/w.log 2>&1; echo "w32k rc=$?"; grep -A3 "failures" $OUT/w.log | tail -3
timeout 120 ridgeline bench fused_add_rmsnorm --shapes $S --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_w32k.json > $OUT/fw.log 2>&1; echo "fused w32k rc=$?"; grep -A3 "failures" $OUT/fw.log | tail -3
timeout 330 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_gpu.py tests/test_gpu_split.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_fp8.py 2>&1 | tee $OUT/pytest-a.log | grep -v "^  File\|^Thread" | tail -8
