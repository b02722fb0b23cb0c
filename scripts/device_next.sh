# Prepared at the end of session 3 for the next GPU session (not run yet): the open questions of issue 6 that need
# the H200. Run as: RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device_next.sh (carry .whl).
# 1. joint_max for dynamic FP8 (one block reduction instead of two, 47 instead of 32 registers): sweep, both ops.
# 2. fp32 weight with bf16 x at decode sizes: weight first or late, capped or not (22% slower than bf16 at 1x4096).
# 3. The FP8 ops at decode sizes with the input hot in L2 (graph-hot), against torch.compile.
source scripts/device_setup.sh
set -o pipefail
timeout 90 python3 scripts/explore_rmsnorm.py $OUT/explore-quant-joint.json --quant --focus --budget 0.08 2>&1 | tail -17
timeout 90 python3 scripts/explore_rmsnorm.py $OUT/explore-quant-fused-joint.json --quant --fused --focus --budget 0.08 2>&1 | tail -17
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-wfp32-decode.json --wdtype fp32 --focus --shapes decode-lite --regime graph-hot --budget 0.1 2>&1 | tail -9
for op in rmsnorm_fp8 rmsnorm_dynamic_quant fused_add_rmsnorm_dynamic_quant; do
  timeout 60 ridgeline bench $op --impl ridgeline --impl torch-compile --shapes decode --regime graph-hot --budget 0.1 --json $OUT/bench_${op}_decode.json > /tmp/d_$op.log 2>&1; echo "$op decode rc=$?"
  python3 scripts/perf_tables.py $OUT/bench_${op}_decode.json 2>&1 | grep -i "geometric"
done
