# Session 11, call 4: inductor's whole-row config (16 warps, rows loaded evict_first, the weight evict_last, stores
# without a hint, residual_out re-read after the reduction) beat ours at the fused op's 16-256 rows of 4096 and at
# 1024x8192 in call 3. Hypothesis: evict_first on the row loads keeps the outputs (the same addresses every call, as
# in a serving graph) in L2. New knob stream_loads; every candidate with and without it, outputs shared as the
# bench writes them; graph-hot decode too (the inputs hot: the hint must not cost there).
source scripts/device/setup.sh
set -o pipefail
E="python3 scripts/explore_rmsnorm.py"
timeout 100 $E $OUT/x-fused-small.json --shapes fused-small --const-n --hoist --stream-loads --fused --shared-out --budget 0.05 2>&1 | tail -4
timeout 110 $E $OUT/x-fused-256-all.json --shapes fused-256 --hoist --stream-loads --fused --shared-out --budget 0.05 2>&1 | tail -2
timeout 90 $E $OUT/x-fused-w8k.json --shapes w8k-fused-mid --const-n --hoist --stream-loads --fused --shared-out --budget 0.05 2>&1 | tail -3
timeout 90 $E $OUT/x-plain-lost.json --shapes plain-lost --const-n --stream-loads --shared-out --budget 0.05 2>&1 | tail -3
timeout 60 $E $OUT/x-plain-small.json --shapes plain-small --const-n --stream-loads --shared-out --budget 0.05 2>&1 | tail -4
timeout 90 $E $OUT/x-fused-decode-hot.json --shapes decode-lite --const-n --hoist --stream-loads --fused --regime graph-hot --budget 0.05 2>&1 | tail -9
echo done
