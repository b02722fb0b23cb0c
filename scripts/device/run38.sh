# Session 6, call 5: stream hints limited to 8-32 rows per SM (1cf7e94): the plain op at 4096 columns beside the
# peers, both regimes (cold-eager lost 5-6% at 16384-65536 rows with the hints in call 3); the config tests.
source scripts/device/setup.sh
set -o pipefail
timeout 90 ridgeline bench rmsnorm --shapes 1x4096,1024x4096,4096x4096,16384x4096,65536x4096,4096x5120 --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_4096.json > $OUT/b.log 2>&1; echo "bench rc=$?"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py 2>&1 | tail -2
