# Session 10, call 3 (next.sh part C). The fp32-weight decode table and the FP8 decode sets, settled (their 1x4096
# figures were taken first in their process before session 9's fix).
source scripts/device/setup.sh
set -o pipefail
timeout 70 ridgeline bench rmsnorm --impl ridgeline --impl liger --impl torch-compile --shapes 1x4096,16x4096,128x4096,256x4096,1x8192,16x8192,128x8192,256x8192 --variant "" --variant w-fp32 --regime graph-hot --budget 0.2 --json $OUT/bench_rmsnorm_wfp32_decode.json > $OUT/wfp32.log 2>&1; echo "wfp32 decode rc=$?"
for op in rmsnorm_fp8 rmsnorm_dynamic_quant; do
  timeout 60 ridgeline bench $op --impl ridgeline --impl torch-compile --shapes decode --regime graph-hot --budget 0.1 --json $OUT/bench_${op}_decode.json > $OUT/$op.log 2>&1; echo "$op decode rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
echo done
