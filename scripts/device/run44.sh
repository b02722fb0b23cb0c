# Session 7, call 4: (1) the hidden size compiled in (LaunchConfig.const_n) in our own kernel: two passes over
# 4K-16K chunks with and without it, and the shipped one-pass config with and without it, at 16K-32K columns,
# plain and fused, graph-cold. Prediction (call 3's ladder: inductor's lead is its constant hidden size): plain
# two-pass const-N at or below torch.compile at 4096 rows (97 us at 4096x24576), and the fused op's two passes
# close to its one pass; small M slower in two passes. (2) Where the fused op's stream hints help at small M
# (call 3: 1-64 rows of 4096, 8-9% faster): 128-256 rows, 5120-8192 columns, graph-cold, and decode shapes
# graph-hot. (3) The GPU and kernel test files on this kernel (N_CONST constexpr; const_n configs in the tests).
source scripts/device/setup.sh
set -o pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-const-n.json --shapes const-n --const-n --budget 0.1 2>&1 | tail -12
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-const-n-fused.json --shapes const-n --const-n --fused --budget 0.1 2>&1 | tail -12
timeout 40 python3 scripts/explore_rmsnorm.py $OUT/explore-small-zone-fused.json --shapes small-zone --fused --focus --stream --budget 0.1 2>&1 | tail -8
timeout 40 python3 scripts/explore_rmsnorm.py $OUT/explore-decode-fused-hot.json --shapes decode-lite --fused --focus --stream --regime graph-hot --budget 0.1 2>&1 | tail -9
timeout 250 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_gpu.py tests/test_gpu_split.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_configs.py 2>&1 | tee $OUT/pytest.log | grep -v "^  File\|^Thread" | tail -4
echo done
