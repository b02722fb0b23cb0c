# Session 6, call 1: weight_evict_last in the two-pass kernel (plain + fused, 16K-32K rows), the joint_max FP8 bits
# on the GPU, and joint_max timing at decode sizes. Hypothesis for the first: inductor loads the weight evict_last
# in its second loop, ours with no policy while x's first-pass lines are evict_last (refuted by this call).
source scripts/device/setup.sh
set -o pipefail
timeout 130 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-wlast.json --shapes w32k-lite --focus --unroll --budget 0.04 2>&1 | tail -25
timeout 130 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-wlast-fused.json --shapes w32k-lite --focus --unroll --fused --budget 0.04 2>&1 | tail -25
timeout 80 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "fp8" 2>&1 | tail -3
timeout 110 python3 scripts/explore_rmsnorm.py $OUT/explore-joint.json --shapes decode-lite --quant --focus --budget 0.05 2>&1 | tail -20
