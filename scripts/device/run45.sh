# Session 7, call 5 (the last): rows of 16K-32K columns as two chunks of 16384 summed elementwise (chunk_sum), the
# hidden size compiled in; the plain op in two passes beyond 2 rows per SM (same bits). (1) The GPU tests of the
# kernels and launch rules (bitwise equality of the one- and two-pass sides on the GPU included). (2) The rule's
# row-count boundary: one pass and two at 256-512 rows. (3) Benched beside the peers at session 5's w32k shapes.
source scripts/device/setup.sh
set -o pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 290 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_rmsnorm_configs.py tests/test_rmsnorm_kernels.py tests/test_gpu.py tests/test_gpu_split.py 2>&1 | tee $OUT/pytest.log | grep -v "^  File\|^Thread" | tail -4
timeout 50 python3 scripts/explore_rmsnorm.py $OUT/explore-zone.json --shapes zone --const-n --budget 0.1 2>&1 | tail -7
S=4096x32768,1024x32768,128x32768,4096x24576,4096x20000,2048x16896,16x20000
timeout 100 ridgeline bench rmsnorm --shapes $S --regime graph-cold --regime cold-eager --budget 0.2 --json $OUT/bench_rmsnorm_w32k.json > $OUT/w.log 2>&1; echo "w32k rc=$?"
timeout 100 ridgeline bench fused_add_rmsnorm --shapes $S --regime graph-cold --regime cold-eager --budget 0.2 --json $OUT/bench_fused_w32k.json > $OUT/fw.log 2>&1; echo "fused w32k rc=$?"
grep -i "geometric" $OUT/w.log $OUT/fw.log
echo done
