# Session 12, call 2: stream_loads (evict_first row loads, unhinted stores) on the FP8 epilogues, which
# config_for's L2 rule leaves out. Call 1 (next.sh) measured the dynamic one at 16-256 rows of 4096: 8-11% faster
# (plain 16x4096 2.01 vs 2.25 us, fused 2.51 vs 2.82). Here: where it stops paying, against the outputs' bytes
# (FP8: 1 byte a value; the fused op's residual_out 2), graph-cold with shared outputs, and cold-eager.
source scripts/device/setup.sh
set -o pipefail
E="python3 scripts/explore_rmsnorm.py"
timeout 110 $E $OUT/ab-fp8-static.json --shapes fp8-l2 --ab-stream-loads --quant static --shared-out --budget 0.1 2>&1 | tail -12
timeout 110 $E $OUT/ab-fp8-dynamic.json --shapes fp8-l2 --ab-stream-loads --quant --shared-out --budget 0.1 2>&1 | tail -12
timeout 130 $E $OUT/ab-fp8-dynamic-fused.json --shapes fp8-l2 --ab-stream-loads --quant --fused --shared-out --budget 0.1 2>&1 | tail -12
timeout 70 $E $OUT/ab-fp8-dynamic-eager.json --shapes fp8-l2-eager --ab-stream-loads --quant --regime cold-eager --budget 0.1 2>&1 | tail -1
timeout 80 $E $OUT/ab-fp8-dynamic-fused-eager.json --shapes fp8-l2-eager --ab-stream-loads --quant --fused --regime cold-eager --budget 0.1 2>&1 | tail -1
echo done
