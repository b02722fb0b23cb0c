# Session 5, call 9: two passes with each pass's chunk loop unrolled (inductor's loops have constant bounds, so
# Triton unrolls them and a thread has every chunk's loads in flight; ours had one chunk's), both ops.
source scripts/device/setup.sh
set -o pipefail
timeout 80 python3 scripts/explore_rmsnorm.py $OUT/explore-unroll.json --shapes w32k-lite --focus --unroll --budget 0.04 2>&1 | tail -5
timeout 80 python3 scripts/explore_rmsnorm.py $OUT/explore-unroll-fused.json --shapes w32k-lite --focus --unroll --fused --budget 0.04 2>&1 | tail -5
