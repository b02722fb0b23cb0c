# Prepared at the end of session 4 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device_next.sh   (carry .whl)
# 1. The GPU and kernel test files on the final commit (session 4 ran them on 55f6258 and 9eed42b; since then
#    rows of 32768 columns take the two-pass kernel again, the fused op's weight timing for split rows changed,
#    and the explore smoke test hides the GPU from its interpreter subprocess).
# 2. The wide-row benches again with the shipped configs (4096x32768 is two-pass now; fused 64x65536 weight late).
# 3. Rows of 16K-32K columns in one program of 32 warps (the whole row in registers: 32768 columns compile to 64
#    registers without spills for sm_90, plain and fused). Prediction: 4096x32768 near torch.compile's 130 us (its
#    autotuner has a config holding the row whole, R0_BLOCK = 32768), against our two-pass 152.7 us.
# 4. What torch.compile's autotuner picks at 4096x32768 (to confirm the reading of its heuristics).
source scripts/device_setup.sh
set -o pipefail
timeout 330 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_gpu.py tests/test_gpu_split.py tests/test_rmsnorm_fp8.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_configs.py tests/test_correctness_harness.py tests/test_profile.py 2>&1 | tee $OUT/pytest-kernels.log | grep -v "^  File\|^Thread" | tail -12
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-lite.json --shapes wide-lite --focus --budget 0.06 2>&1 | tail -9
timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-wide-lite-fused.json --shapes wide-lite --focus --fused --budget 0.06 2>&1 | tail -9
W=2048x65536,4096x32768,512x131072,64x65536,1x65536
timeout 110 ridgeline bench rmsnorm --shapes $W --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_wide.json > /tmp/w.log 2>&1; echo "wide rc=$?"
timeout 110 ridgeline bench fused_add_rmsnorm --shapes $W --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_wide.json > /tmp/fw.log 2>&1; echo "fused wide rc=$?"
TORCHINDUCTOR_CACHE_DIR=/tmp/ind TORCH_LOGS=+inductor timeout 60 python3 scripts/inductor_code.py $OUT/inductor 4096x32768 > $OUT/inductor-log.txt 2>&1; grep -i "XBLOCK\|R0_BLOCK\|num_warps\|num_stages" $OUT/inductor-log.txt | tail -5
