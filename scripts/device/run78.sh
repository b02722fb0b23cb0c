# Session 11, call 7 (final code): the plain op's one block of 8192 keeps no L2 hint up to 2 rows per SM (call 6:
# stream_loads cost its graph-hot decode rows 3-8%). (1) The plain decode set again. (2) Every GPU-marked test. (3)
# Cold-eager again at the small shapes whose call-6 figures carried 48-60 us of host time (IQR up to 34 us). (4) fp16.
source scripts/device/setup.sh
set -o pipefail
timeout 60 ridgeline bench rmsnorm --shapes decode --regime graph-hot --budget 0.15 --json $OUT/bench_rmsnorm_decode.json > $OUT/d.log 2>&1; echo "decode rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_decode.json 2>&1 | grep -i "geometric"
timeout 170 python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee $OUT/pytest-gpu.log | tail -2
S=1x4096,16x4096,1024x4096,4096x4096,1024x8192
timeout 50 ridgeline bench rmsnorm --shapes $S --regime cold-eager --budget 0.25 --json $OUT/bench_rmsnorm_eager.json > $OUT/e.log 2>&1; echo "eager rc=$?"
timeout 60 ridgeline bench fused_add_rmsnorm --shapes $S --regime cold-eager --budget 0.25 --json $OUT/bench_fused_eager.json > $OUT/fe.log 2>&1; echo "feager rc=$?"
for op in rmsnorm fused_add_rmsnorm; do
  timeout 70 ridgeline bench $op --shapes sweep --dtype fp16 --regime graph-cold --budget 0.1 --json $OUT/bench_${op}_fp16.json > $OUT/${op}_fp16.log 2>&1; echo "$op fp16 rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_*eager.json $OUT/bench_*fp16.json 2>&1 | grep -i "geometric"
echo done
