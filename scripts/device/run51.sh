# Session 8, call 7 (last). Ops whose records predate this session's kernel change (rstd as one FFMA by the host's
# 1/N, every config): the three FP8 ops (graph-cold sweep, torch.compile beside them as in sessions 3 and 6), fp16
# sweeps of both 16-bit ops (graph-cold), and the fused op's cold-eager small shapes again (call 4's were unstable:
# host time 43-46 us against a 60 us flush, IQR up to 14 us).
source scripts/device/setup.sh
set -o pipefail
timeout 45 ridgeline bench fused_add_rmsnorm --shapes 1x4096,16x4096,128x4096,1024x4096 --regime cold-eager --budget 0.3 --json $OUT/bench_fused_small_ce.json > $OUT/fce.log 2>&1; echo "fce rc=$?"
for op in rmsnorm_fp8 rmsnorm_dynamic_quant fused_add_rmsnorm_dynamic_quant; do
  timeout 75 ridgeline bench $op --impl ridgeline --impl torch-compile --shapes sweep --regime graph-cold --budget 0.1 --json $OUT/bench_${op}_sweep.json > $OUT/$op.log 2>&1; echo "$op rc=$?"
done
for op in rmsnorm fused_add_rmsnorm; do
  timeout 80 ridgeline bench $op --shapes sweep --dtype fp16 --regime graph-cold --budget 0.15 --json $OUT/bench_${op}_fp16.json > $OUT/${op}_fp16.log 2>&1; echo "$op fp16 rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
echo done
