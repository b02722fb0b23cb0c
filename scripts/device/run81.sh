# Session 12, call 4: the FP8 ops' graph-cold sweeps on the new L2 rule again, whole (call 3's were cut at 60 s
# and its static record did not come back: at most 8 files return).
source scripts/device/setup.sh
set -o pipefail
for op in rmsnorm_fp8 rmsnorm_dynamic_quant fused_add_rmsnorm_dynamic_quant; do
  timeout 110 ridgeline bench $op --shapes sweep --regime graph-cold --budget 0.1 --json $OUT/bench_${op}_sweep.json > /tmp/${op}_sweep.log 2>&1; echo "$op sweep rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
echo done
