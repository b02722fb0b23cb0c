# Session 2, call 5 on the H200: the fix for the fused op at 4100 (pieces no smaller than the threads) checked
# first, then fused add + RMSNorm against the peers (sweep graph-cold + cold-eager, decode graph-hot), rmsnorm
# again at the two shapes whose config the fix changed, and the FP8 ops against their baselines.
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_correctness_harness.py tests/test_rmsnorm_fp8.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_configs.py 2>&1 | tee $OUT/pytest-fix.log | tail -3
timeout 170 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_sweep.json > /tmp/s.log 2>&1; echo "sweep rc=$?"
timeout 60 ridgeline bench fused_add_rmsnorm --shapes decode --regime graph-hot --budget 0.25 --json $OUT/bench_fused_decode.json > /tmp/d.log 2>&1; echo "decode rc=$?"
timeout 40 ridgeline bench rmsnorm --shapes 4096x4100,4096x5125 --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_unaligned.json > /tmp/u.log 2>&1; echo "unaligned rc=$?"
for op in rmsnorm_dynamic_quant fused_add_rmsnorm_dynamic_quant rmsnorm_fp8; do
  timeout 55 ridgeline bench $op --shapes sweep --regime graph-cold --budget 0.1 --json $OUT/bench_$op.json > /tmp/q_$op.log 2>&1; echo "$op rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_fused_sweep.json $OUT/bench_fused_decode.json 2>&1 | grep -i "geometric"
