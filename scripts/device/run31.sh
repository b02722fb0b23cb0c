# Session 5, call 7: two passes over 4K-16K chunks (inductor's pick at 16K-32K columns: 16384-column chunks, 32
# warps) for both ops, beside the shipped one pass: can the plain op's loss at large M close with a layout the
# fused op can share?
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-two-pass.json --shapes w32k-lite --focus --two-pass --budget 0.05 2>&1 | tail -5
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-two-pass-fused.json --shapes w32k-lite --focus --two-pass --fused --budget 0.05 2>&1 | tail -5
