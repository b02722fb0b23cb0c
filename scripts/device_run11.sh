# Session 2, call 5 on the H200 (final kernel): fused add + RMSNorm against the peers (sweep graph-cold +
# cold-eager, decode graph-hot), the FP8 ops against their baselines (graph-cold sweep), host breakdown.
source scripts/device_setup.sh
timeout 170 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_sweep.json > /tmp/s.log 2>&1; echo "sweep rc=$?"
timeout 60 ridgeline bench fused_add_rmsnorm --shapes decode --regime graph-hot --budget 0.25 --json $OUT/bench_fused_decode.json > /tmp/d.log 2>&1; echo "decode rc=$?"
for op in rmsnorm_dynamic_quant fused_add_rmsnorm_dynamic_quant rmsnorm_fp8; do
  timeout 80 ridgeline bench $op --shapes sweep --regime graph-cold --budget 0.15 --json $OUT/bench_$op.json > /tmp/q_$op.log 2>&1; echo "$op rc=$?"; tail -2 /tmp/q_$op.log
done
timeout 60 python3 scripts/host_breakdown.py $OUT/host-breakdown.json | tail -12
python3 scripts/perf_tables.py $OUT/bench_fused_sweep.json $OUT/bench_fused_decode.json 2>&1 | grep -i "geometric"
