# Session 12, call 8 (final code): every GPU-marked test.
source scripts/device/setup.sh
set -o pipefail
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee $OUT/pytest-gpu.log | tail -3
echo done
