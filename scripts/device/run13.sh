# Session 2, call 7 on the H200: fp32 weight after the fix (weight loaded after the reduction, no register cap).
source scripts/device/setup.sh
timeout 100 ridgeline bench rmsnorm --impl ridgeline --shapes 1x4096,1024x4096,4096x4096,16384x4096,4096x8192,16384x8192 --variant "" --variant w-fp32 --regime graph-cold --budget 0.15 --json $OUT/bench_rmsnorm_wfp32_fixed.json 2>&1 | tail -16
