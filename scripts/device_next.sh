# Prepared at the end of session 6 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device_next.sh   (carry .whl)
# 1. What session 6's launch rules take by likeness, not measurement (kernels/rmsnorm_config.py, JOINT_MAX_ROWS_PER_SM):
#    joint_max at other widths (7168, 16384) and in fp16 (prediction: 3-10% faster up to 2048 rows, as measured at
#    4096-8192 in bf16); the stream hints' cost after an L2 flush (cold-eager) at 12-23 rows per SM, measured only
#    graph-cold there (prediction: none, as at 31 rows per SM).
# 2. The fused op's one consistent small-batch loss: graph-cold 16x4096 2.24-2.32 us against torch.compile's
#    2.06-2.08 (bf16 and fp16 sweeps). Dump inductor's kernel there (scripts/inductor_code.py) and compare its
#    layout (warps, XBLOCK, loads) with ours before guessing.
# 3. A fresh fused sweep (bf16; session 2's is the one the verdict quotes) on the final code.
# 0. First, the GPU and kernel test files: they last ran at f1c8481 (session 6 call 4); since then the stream-hint
#    rule narrowed to 4096-5120 columns, the launch rules moved to kernels/rmsnorm_config.py (pure Python, kernel
#    code unchanged) and the compile tests share a helper.
# Two calls (each under 10 minutes): this one (0 and 1), then with ONLY_SECOND=1 the inductor dump and the sweep.
source scripts/device_setup.sh
set -o pipefail
if [ -z "$ONLY_SECOND" ]; then
timeout 330 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_gpu.py tests/test_gpu_split.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_fp8.py tests/test_rmsnorm_configs.py tests/test_profile.py 2>&1 | tee $OUT/pytest.log | grep -v "^  File\|^Thread" | tail -5
timeout 90 python3 scripts/explore_rmsnorm.py $OUT/explore-stream-mid-ce.json --shapes stream-mid --focus --stream --regime cold-eager --budget 0.1 2>&1 | tail -5
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-joint-wide.json --shapes joint-wide --quant --focus --budget 0.05 2>&1 | tail -9
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-joint-fp16.json --shapes joint --quant --focus --dtype fp16 --budget 0.05 2>&1 | tail -11
else
timeout 120 python3 scripts/inductor_code.py $OUT/inductor-fused-small 16x4096 1x4096 1024x8192 --fused 2>&1 | tail -3
timeout 150 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_sweep.json > $OUT/fused.log 2>&1; echo "fused rc=$?"
fi
