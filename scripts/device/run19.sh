# Session 4, call 2 on the H200: call 1 found two bugs in the split kernel's launch (a non-power-of-two arange,
# registers read before Triton loaded the binary); again: GPU tests of the split rows, then split configs
# against the two-pass kernel at wide rows (plain, fused), then joint_max for dynamic FP8 (sweep).
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=60 tests/test_gpu_split.py 2>&1 | tee $OUT/pytest-split.log | grep -v "^  File\|^Thread" | tail -15
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-wide.json --shapes wide --focus --budget 0.06 2>&1 | tail -7
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-fused.json --shapes wide --focus --fused --budget 0.06 2>&1 | tail -7
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-quant-joint.json --quant --focus --budget 0.06 2>&1 | tail -17
