# Session 11, call 6. The L2 rule shipped from calls 2-5: one pass with 16-bit outputs loads its rows evict_first
# (stream_loads) while the outputs fit in 0.55 of the L2 (replacing stream hints there). (1) Both sweeps (graph-cold
# and cold-eager) and both decode sets (graph-hot), peers in the same run.
source scripts/device/setup.sh
set -o pipefail
timeout 160 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.25 --json $OUT/bench_rmsnorm_sweep.json > $OUT/s.log 2>&1; echo "sweep rc=$?"
timeout 170 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.25 --json $OUT/bench_fused_sweep.json > $OUT/fs.log 2>&1; echo "fsweep rc=$?"
timeout 60 ridgeline bench rmsnorm --shapes decode --regime graph-hot --budget 0.15 --json $OUT/bench_rmsnorm_decode.json > $OUT/d.log 2>&1; echo "decode rc=$?"
timeout 60 ridgeline bench fused_add_rmsnorm --shapes decode --regime graph-hot --budget 0.15 --json $OUT/bench_fused_decode.json > $OUT/fd.log 2>&1; echo "fdecode rc=$?"
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
echo done
