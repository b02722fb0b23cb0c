# Session 4, call 4 on the H200: split rows with partials published as tagged 64-bit words (one store and one
# poll per row instead of store, release add, acquire poll and load), x held in its 16-bit type across the wait
# and the weight re-read from L1 (fewer registers: more programs per SM), the grid sized by the driver's
# occupancy (call 3: a cooperative launch refused one config's grid). Tests, then timed at wide rows.
source scripts/device/setup.sh
set -o pipefail
timeout 170 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=60 tests/test_gpu_split.py 2>&1 | tee $OUT/pytest-split.log | grep -v "^  File\|^Thread" | tail -15
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-wide.json --shapes wide --focus --budget 0.06 2>&1 | tail -7
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-fused.json --shapes wide --focus --fused --budget 0.06 2>&1 | tail -7
