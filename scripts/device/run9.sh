# Session 2, call 3 on the H200: weight-first and a 32-register cap around the new default configs at the row
# counts where occupancy decides (one wave or two), both ops; then the GPU tests on the new kernel.
source scripts/device/setup.sh
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-rmsnorm-cliff.json --shapes cliff --focus --budget 0.2 | tail -16
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-cliff.json --fused --shapes cliff --focus --budget 0.2 | tail -16
set -o pipefail
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee $OUT/pytest-gpu.log | tail -4
