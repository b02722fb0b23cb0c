# Session 5, call 2: rows off 16-byte boundaries read as shifted aligned spans (checks, then timed against the
# shipped 2-/8-byte loads); rows of 16K-32K columns in one program (16 or 32 warps, one block or pieces) against
# two passes; the code torch.compile runs at 4096x32768.
source scripts/device/setup.sh
set -o pipefail
timeout 90 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=80 tests/test_rmsnorm_shift.py 2>&1 | tee $OUT/pytest-shift.log | tail -3
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-odd.json --shapes odd --focus --budget 0.06 2>&1 | tail -9
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-odd-fused.json --shapes odd --focus --fused --budget 0.06 2>&1 | tail -9
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k.json --shapes w32k --focus --budget 0.06 2>&1 | tail -9
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-fused.json --shapes w32k --focus --fused --budget 0.06 2>&1 | tail -9
TORCHINDUCTOR_CACHE_DIR=/tmp/ind timeout 60 python3 scripts/inductor_code.py /tmp/indcode 4096x32768 > /tmp/ind.log 2>&1; tar czf $OUT/inductor-32k.tgz /tmp/indcode /tmp/ind.log 2>/dev/null; grep -h "R0_BLOCK\|num_warps\|persistent\|def triton" /tmp/indcode/* 2>/dev/null | head -12
