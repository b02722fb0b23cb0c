# Session 2, call 6 on the H200: float32 weight with bf16 x against a bf16 weight (issue 6: same speed), graph-cold.
source scripts/device/setup.sh
timeout 150 ridgeline bench rmsnorm --impl ridgeline --shapes 1x4096,128x4096,1024x4096,4096x4096,16384x4096,4096x8192,16384x8192 --variant "" --variant w-fp32 --regime graph-cold --budget 0.2 --json $OUT/bench_rmsnorm_wfp32.json 2>&1 | tail -20
