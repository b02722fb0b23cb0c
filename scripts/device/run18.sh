# Session 4, call 1 on the H200: rows split across programs (kernels/rmsnorm_split.py) — GPU tests first (a
# deadlock would show here), then the split configs against the two-pass kernel at wide rows, plain and fused;
# then fp32 weight at decode sizes (weight first or late, capped or not).
source scripts/device/setup.sh
set -o pipefail
timeout 170 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=60 -x tests/test_gpu_split.py 2>&1 | tee $OUT/pytest-split.log | grep -v "^  File\|^Thread" | tail -15
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore-wide.json --shapes wide --focus --budget 0.06 2>&1 | tail -7
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-fused.json --shapes wide --focus --fused --budget 0.06 2>&1 | tail -7
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-wfp32-decode.json --wdtype fp32 --focus --shapes decode-lite --regime graph-hot --budget 0.1 2>&1 | tail -9
