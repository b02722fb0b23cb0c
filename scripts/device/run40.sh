# Session 6, call 7 (the last few minutes of device time): stream hints where the rule takes them by likeness,
# timed with and without: 12-23 rows per SM (bf16) and fp16 at 16-31 rows per SM.
source scripts/device/setup.sh
set -o pipefail
timeout 70 python3 scripts/explore_rmsnorm.py $OUT/explore-stream-mid.json --shapes stream-mid --focus --stream --budget 0.05 2>&1 | tail -5
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-stream-fp16.json --shapes stream-fp16 --focus --stream --dtype fp16 --budget 0.05 2>&1 | tail -4
