# Prepared at the end of session 5 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device_next.sh   (carry .whl)
# 1. Why our two-pass kernel trails inductor's at the same layout (16384-column chunks, 32 warps: 129.8 vs 97.5 us
#    at 4096x24576). Compiled side by side for sm_90 (session 5) the two differ in one thing that moves bytes:
#    inductor loads the weight with evict_last in its second loop; ours loads it with no policy while x's
#    first-pass lines are marked evict_last, so every row may re-read the weight from DRAM (48 KB a row at
#    24576 columns: up to half as many bytes again as the op moves). LaunchConfig.weight_evict_last tries it.
#    Prediction: our two-pass layouts move to within a few % of inductor's (97.5 / 81.6 us at 4096x24576 /
#    4096x20000); if a two-pass layout then beats the one-pass rows for both ops, rows of 16K-32K columns take it.
# 2. Dynamic FP8 with the row's max reduced with its sum (joint_max): since efcabe4 it should give the same bits
#    as the separate max (y = (x * w) * rstd; test_fp8_knobs_leave_the_bits_alone compares them on the GPU),
#    then time it at decode and mid sizes; if it wins in one wave as in session 4, `_quant` takes it there.
# 3. The GPU and kernel test files on the final commit (session 5 ran them in parts: 1eaf97f, c94cb94,
#    87a3d25, 246307b; since then: default-off knobs of the two-pass kernel (PTX unchanged) and the dynamic FP8
#    op's y = (x * w) * rstd).
source scripts/device_setup.sh
set -o pipefail
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-wlast.json --shapes w32k-lite --focus --unroll --budget 0.04 2>&1 | tail -5
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-wlast-fused.json --shapes w32k-lite --focus --unroll --fused --budget 0.04 2>&1 | tail -5
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "fp8" 2>&1 | tail -3
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-joint.json --shapes decode-lite --quant --focus --budget 0.05 2>&1 | tail -9
timeout 330 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_gpu.py tests/test_gpu_split.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_fp8.py 2>&1 | tee $OUT/pytest-a.log | grep -v "^  File\|^Thread" | tail -5
