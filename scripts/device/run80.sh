# Session 12, call 3: config_for's L2 rule now counts the rows read and takes in the FP8 epilogues (call 2,
# h200-explore-s12-ab-fp8-*.json). (1) Graph-hot decode rows of the FP8 ops, A/B (not measured in call 2).
# (2) The FP8 ops' sweeps (graph-cold) and decode sets (graph-hot) on the new rule, peers in the same run.
# (3) Every GPU-marked test.
source scripts/device/setup.sh
set -o pipefail
E="python3 scripts/explore_rmsnorm.py"
timeout 40 $E $OUT/ab-fp8-static-decode-hot.json --shapes decode-lite --ab-stream-loads --quant static --shared-out --regime graph-hot --budget 0.05 2>&1 | tail -1
timeout 40 $E $OUT/ab-fp8-dynamic-decode-hot.json --shapes decode-lite --ab-stream-loads --quant --shared-out --regime graph-hot --budget 0.05 2>&1 | tail -1
timeout 40 $E $OUT/ab-fp8-dynamic-fused-decode-hot.json --shapes decode-lite --ab-stream-loads --quant --fused --shared-out --regime graph-hot --budget 0.05 2>&1 | tail -1
for op in rmsnorm_fp8 rmsnorm_dynamic_quant fused_add_rmsnorm_dynamic_quant; do
  timeout 60 ridgeline bench $op --shapes sweep --regime graph-cold --budget 0.1 --json $OUT/bench_${op}_sweep.json > $OUT/${op}_sweep.log 2>&1; echo "$op sweep rc=$?"
  timeout 40 ridgeline bench $op --shapes decode --regime graph-hot --budget 0.1 --json $OUT/bench_${op}_decode.json > $OUT/${op}_decode.log 2>&1; echo "$op decode rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
timeout 170 python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee $OUT/pytest-gpu.log | tail -2
echo done
