# Session 3, call 2 on the H200: the whole suite again (call 1 ran past its 240 s limit: durations this time),
# an A/B of the old standalone FP8 kernel against the QUANT epilogue in one process, then dynamic FP8 benches.
source scripts/device/setup.sh
set -o pipefail
timeout 330 python3 -m pytest -q -p no:cacheprovider --durations=25 tests 2>&1 | tee $OUT/pytest-all.log | tail -32
# (_ab_fp8.py was committed next as scripts/ab_fp8_kernels.py)
timeout 110 python3 scripts/_ab_fp8.py $OUT/ab-fp8.json 2>&1 | tail -26
timeout 80 ridgeline bench rmsnorm_dynamic_quant --impl ridgeline --impl torch-compile --shapes sweep --regime graph-cold --budget 0.1 --json $OUT/bench_rmsnorm_dynamic_quant.json > /tmp/q.log 2>&1; echo "dyn rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_dynamic_quant.json 2>&1 | tail -21
