# Prepared at the end of session 5 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device_next.sh   (carry .whl)
# 1. Why our two-pass kernel trails inductor's at the same layout (16384-column chunks, 32 warps: 129.8 vs 97.5 us
#    at 4096x24576). Compiled side by side for sm_90 (session 5) the two differ in one thing that moves bytes:
#    inductor loads the weight with evict_last in its second loop; ours loads it with no policy while x's
#    first-pass lines are marked evict_last, so every row may re-read the weight from DRAM (48 KB a row at
#    24576 columns: up to half as many bytes again as the op moves). LaunchConfig.weight_evict_last tries it.
#    Prediction: our two-pass layouts move to within a few % of inductor's (97.5 / 81.6 us at 4096x24576 /
#    4096x20000); if a two-pass layout then beats the one-pass rows for both ops, rows of 16K-32K columns take it.
# 2. The GPU and kernel test files on the final commit (session 5 ran them in parts: 1eaf97f, c94cb94,
#    87a3d25, 246307b; since then only default-off knobs of the two-pass kernel, PTX unchanged).
source scripts/device_setup.sh
set -o pipefail
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-wlast.json --shapes w32k-lite --focus --unroll --budget 0.04 2>&1 | tail -5
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-wlast-fused.json --shapes w32k-lite --focus --unroll --fused --budget 0.04 2>&1 | tail -5
timeout 330 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_gpu.py tests/test_gpu_split.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_fp8.py 2>&1 | tee $OUT/pytest-a.log | grep -v "^  File\|^Thread" | tail -5
