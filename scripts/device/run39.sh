# Session 6, call 6: the plain op's sweep on the final launch rules (stream hints 8-32 rows per SM; 4100 included),
# both regimes, beside the peers: the record the verdict of docs/perf/rmsnorm.md quotes.
source scripts/device/setup.sh
set -o pipefail
timeout 150 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_sweep.json > $OUT/rms.log 2>&1; echo "rmsnorm rc=$?"; grep -i "geometric" $OUT/rms.log | tail -2
