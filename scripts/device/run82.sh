# Session 12, call 5: the FP8 ops in the cold-eager regime (an L2 flush before each eager call), on the new L2 rule;
# no FP8 record had it before.
source scripts/device/setup.sh
set -o pipefail
for op in rmsnorm_fp8 rmsnorm_dynamic_quant fused_add_rmsnorm_dynamic_quant; do
  timeout 130 ridgeline bench $op --shapes sweep --regime cold-eager --budget 0.1 --json $OUT/bench_${op}_eager.json > /tmp/${op}_eager.log 2>&1; echo "$op eager rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
echo done
