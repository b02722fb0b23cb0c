# Session 6, call 4: the GPU and kernel test files on the final kernel code; the plain op at unaligned sizes with
# stream hints (4100 takes them since this commit) and the plain dynamic FP8 op on rows of pieces with joint_max.
source scripts/device/setup.sh
set -o pipefail
timeout 60 ridgeline bench rmsnorm --shapes 4096x4100,4096x5125,2048x4100 --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_unaligned.json > $OUT/u.log 2>&1; echo "unaligned rc=$?"
timeout 60 ridgeline bench rmsnorm_dynamic_quant --impl ridgeline --impl torch-compile --shapes 1024x4100,2048x4100,1024x5120,2048x5120,1024x5125,2048x5125,128x5120 --regime graph-cold --budget 0.08 --json $OUT/bench_dq_pieces.json > $OUT/dqp.log 2>&1; echo "dq pieces rc=$?"
timeout 420 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_gpu.py tests/test_gpu_split.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_fp8.py tests/test_rmsnorm_configs.py tests/test_profile.py 2>&1 | tee $OUT/pytest.log | grep -v "^  File\|^Thread" | tail -8
