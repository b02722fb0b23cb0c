# Session 10, call 7. (0) The other GPU-marked tests (kernels at edge shapes, >2^31 elements, torch.compile, FP8) on
# the new 4096-column layout. (1) fp16 sweeps of both ops. (2) An fp32 weight: rows of 4096 now take the chunks of 2048
# too (_wide_weight keeps the layout); the decode table and large rows beside the bf16 weight.
source scripts/device/setup.sh
set -o pipefail
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests --deselect tests/test_rmsnorm_configs.py --deselect tests/test_gpu.py 2>&1 | tee $OUT/pytest-gpu-rest.log | tail -2
for op in rmsnorm fused_add_rmsnorm; do
  timeout 80 ridgeline bench $op --shapes sweep --dtype fp16 --regime graph-cold --budget 0.15 --json $OUT/bench_${op}_fp16.json > $OUT/${op}_fp16.log 2>&1; echo "$op fp16 rc=$?"
done
timeout 70 ridgeline bench rmsnorm --impl ridgeline --impl liger --impl torch-compile --shapes 1x4096,16x4096,128x4096,256x4096,1x8192,16x8192,128x8192,256x8192 --variant "" --variant w-fp32 --regime graph-hot --budget 0.2 --json $OUT/bench_rmsnorm_wfp32_decode.json > $OUT/wfp32.log 2>&1; echo "wfp32 decode rc=$?"
timeout 60 ridgeline bench rmsnorm --impl ridgeline --impl liger --shapes 1024x4096,4096x4096,16384x4096,65536x4096,4096x8192 --variant "" --variant w-fp32 --regime graph-cold --budget 0.15 --json $OUT/bench_rmsnorm_wfp32_large.json > $OUT/wfp32l.log 2>&1; echo "wfp32 large rc=$?"
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
echo done
