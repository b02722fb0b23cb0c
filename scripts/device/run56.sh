# Session 9, call 4. The rows the session-9 rules changed, beside the peers: 16384 and 16K-24K columns at several row
# counts (both ops, graph-cold), the fp16 sweeps of both ops (graph-cold), then every GPU-marked test.
source scripts/device/setup.sh
set -o pipefail
W=1x16384,128x16384,256x16384,1024x16384,4096x16384,1x20000,1024x20000,4096x20000,2048x16896
for op in rmsnorm fused_add_rmsnorm; do
  timeout 90 ridgeline bench $op --shapes $W --regime graph-cold --budget 0.15 --json $OUT/bench_${op}_wide.json > $OUT/${op}_wide.log 2>&1; echo "$op wide rc=$?"
done
for op in rmsnorm fused_add_rmsnorm; do
  timeout 80 ridgeline bench $op --shapes sweep --dtype fp16 --regime graph-cold --budget 0.15 --json $OUT/bench_${op}_fp16.json > $OUT/${op}_fp16.log 2>&1; echo "$op fp16 rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
timeout 170 python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee $OUT/pytest-gpu.log | tail -3
echo done
