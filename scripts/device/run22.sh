# Session 4, call 5 on the H200: split rows, final form (counted partials, chunk 8192, 8 warps, x held 16-bit
# through the wait, weight after the wait or, at few rows, with x; grid from the driver's occupancy). Tests; the
# weight's timing at wide rows; wide-row benches with the peers (plain, fused); fp32 weight at decode sizes.
source scripts/device/setup.sh
set -o pipefail
timeout 100 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=60 tests/test_gpu_split.py 2>&1 | tee $OUT/pytest-split.log | grep -v "^  File\|^Thread" | tail -8
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-lite.json --shapes wide-lite --focus --budget 0.06 2>&1 | tail -7
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-lite-fused.json --shapes wide-lite --focus --fused --budget 0.06 2>&1 | tail -7
W=2048x65536,4096x32768,512x131072,64x65536,1x65536
timeout 110 ridgeline bench rmsnorm --shapes $W --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_wide.json > /tmp/w.log 2>&1; echo "wide rc=$?"; tail -3 /tmp/w.log
timeout 110 ridgeline bench fused_add_rmsnorm --shapes $W --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_wide.json > /tmp/fw.log 2>&1; echo "fused wide rc=$?"; tail -3 /tmp/fw.log
timeout 70 ridgeline bench rmsnorm --impl ridgeline --impl liger --impl torch-compile --shapes 1x4096,16x4096,128x4096,256x4096,1x8192,16x8192,128x8192,256x8192 --variant "" --variant w-fp32 --regime graph-hot --budget 0.2 --json $OUT/bench_rmsnorm_wfp32_decode.json > /tmp/f.log 2>&1; echo "wfp32 decode rc=$?"
