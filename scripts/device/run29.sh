# Session 5, call 5: the rest of the GPU tests (configs and layouts, harness, profile).
source scripts/device/setup.sh
set -o pipefail
timeout 500 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_rmsnorm_configs.py tests/test_correctness_harness.py tests/test_profile.py 2>&1 | tee $OUT/pytest-b.log | grep -v "^  File\|^Thread" | tail -8
