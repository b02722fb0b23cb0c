# Session 4, call 3 on the H200: split rows lost to the two-pass kernel at many rows (2048x65536: 186 vs 178 us)
# and won at few (1x65536: 5.5 vs 16.1 us). Now: the split kernel prefetching the next row while it waits, and
# the two-pass kernel that sums chunks as the split does (same bits, so the row count may choose): tests, then
# timed at wide rows, plain and fused.
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=60 tests/test_gpu_split.py 2>&1 | tee $OUT/pytest-split.log | grep -v "^  File\|^Thread" | tail -15
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-wide.json --shapes wide --focus --budget 0.06 2>&1 | tail -7
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-fused.json --shapes wide --focus --fused --budget 0.06 2>&1 | tail -7
