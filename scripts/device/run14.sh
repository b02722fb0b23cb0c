# Session 3, call 1 on the H200: the FP8 ops now run the main kernel (pieces, weight first, two passes for wide
# rows, fast launch). Whole test suite on the GPU, then the dynamic FP8 epilogue's knobs (explore --focus --quant,
# plain and fused), then static FP8 against torch.compile.
source scripts/device/setup.sh
set -o pipefail
timeout 240 python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee $OUT/pytest-all.log | tail -4
timeout 75 python3 scripts/explore_rmsnorm.py $OUT/explore-quant-sweep.json --quant --focus --budget 0.08 2>&1 | tail -17
timeout 75 python3 scripts/explore_rmsnorm.py $OUT/explore-quant-fused-sweep.json --quant --fused --focus --budget 0.08 2>&1 | tail -17
timeout 80 ridgeline bench rmsnorm_fp8 --impl ridgeline --impl torch-compile --shapes sweep --regime graph-cold --budget 0.1 --json $OUT/bench_rmsnorm_fp8.json > /tmp/q.log 2>&1; echo "fp8 rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_fp8.json 2>&1 | tail -22
