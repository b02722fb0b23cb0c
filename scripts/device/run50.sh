# Session 8, call 4. (1) The chunk-bit GPU tests (call 3's test run hit its time limit before them). (2) Both sweeps
# on the final kernel code (every config's rstd is now one FFMA by the host's 1/N; rows of 16K-24K columns chunked),
# graph-cold and cold-eager, the peers in the same run.
source scripts/device/setup.sh
set -o pipefail
timeout 90 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "chunk or 16k or knobs" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 200 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_sweep.json > $OUT/s.log 2>&1; echo "sweep rc=$?"
timeout 200 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_sweep.json > $OUT/fs.log 2>&1; echo "fsweep rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_sweep.json $OUT/bench_fused_sweep.json 2>&1 | grep -i "geometric"
echo done
