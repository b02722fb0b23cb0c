# Session 9, call 3. Shipped since call 2: the fused op's 16-bit pieces and chunks hoist their loads (hoist_loads),
# and 16-bit rows of 16384 columns are two chunks of 8192 (one pass up to 2 rows per SM plain / 8 fused, two passes
# beyond). (1) The GPU bit tests of both (chunk sums, knobs, the two-pass zone at 16384). (2) Both sweeps, graph-cold
# and cold-eager, the peers in the same run.
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "chunk or 16k or knobs or 16384 or hoist" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 200 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_sweep.json > $OUT/s.log 2>&1; echo "sweep rc=$?"
timeout 200 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_sweep.json > $OUT/fs.log 2>&1; echo "fsweep rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_sweep.json $OUT/bench_fused_sweep.json 2>&1 | grep -i "geometric"
echo done
