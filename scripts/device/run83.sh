# Session 12, call 6 (final code): the plain op's one block of 7168 takes stream hints from the L2 share to 32 rows
# per SM (calls 1 and session 11's A/B). The plain op's sweep, graph-cold and cold-eager, peers in the same run;
# the launch-rule GPU tests.
source scripts/device/setup.sh
set -o pipefail
timeout 320 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.25 --json $OUT/bench_rmsnorm_sweep.json > /tmp/sweep.log 2>&1; echo "sweep rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_sweep.json 2>&1 | grep -i "geometric"
timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_rmsnorm_configs.py 2>&1 | tee $OUT/pytest-gpu.log | tail -2
echo done
