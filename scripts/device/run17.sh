# Session 3, call 4 on the H200: the GPU and kernel test files on the final kernel (the layout check now compiles
# in parallel: calls 1-3 ran past their limits inside it), with durations.
source scripts/device/setup.sh
set -o pipefail
timeout 330 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 --durations=15 tests/test_gpu.py tests/test_rmsnorm_fp8.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_configs.py tests/test_correctness_harness.py tests/test_profile.py 2>&1 | tee $OUT/pytest-kernels.log | grep -v "^  File\|^Thread" | tail -30
