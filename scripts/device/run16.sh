# Session 3, call 3 on the H200: FP8 weight loaded once after the reduction beyond one wave (A/B of call 2).
# Tests from the GPU file through the kernel files (the whole-suite runs of calls 1-2 stopped inside
# test_rmsnorm_kernels.py: faulthandler dumps where), then the three FP8 ops against torch.compile.
source scripts/device/setup.sh
set -o pipefail
timeout 200 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=40 --durations=12 tests/test_gpu.py tests/test_rmsnorm_configs.py tests/test_rmsnorm_fp8.py tests/test_rmsnorm_kernels.py 2>&1 | tee $OUT/pytest-kernels.log | tail -40
for op in rmsnorm_fp8 rmsnorm_dynamic_quant fused_add_rmsnorm_dynamic_quant; do
  timeout 75 ridgeline bench $op --impl ridgeline --impl torch-compile --shapes sweep --regime graph-cold --budget 0.08 --json $OUT/bench_$op.json > /tmp/q_$op.log 2>&1; echo "$op rc=$?"
  python3 scripts/perf_tables.py $OUT/bench_$op.json 2>&1 | grep -i "geometric"
done
