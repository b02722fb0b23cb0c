# Session 5, call 3: rows of 16K-32K columns: one pass (16/32 warps, block or pieces) against two passes over one
# row-wide chunk (torch.compile's reduction kernel) and the shipped two passes over 8K chunks.
source scripts/device/setup.sh
set -o pipefail
timeout 140 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k.json --shapes w32k --focus --budget 0.06 2>&1 | tail -9
timeout 140 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-fused.json --shapes w32k --focus --fused --budget 0.06 2>&1 | tail -9
