# Session 5, call 8: the config tests on the final commit; two passes without the grid-stride loop around the
# row (inductor's kernel has none) at 16K-32K columns.
source scripts/device/setup.sh
set -o pipefail
timeout 260 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_rmsnorm_configs.py 2>&1 | tee $OUT/pytest-d.log | tail -3
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-two-pass-noloop.json --shapes w32k-lite --focus --two-pass --budget 0.04 2>&1 | tail -5
