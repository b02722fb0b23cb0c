# Session 9, call 8. Is the chunked one pass's loss at one row (graph-hot: plain 1x4096 1.51 vs 1.34 us, fused 1.72
# vs 1.49, call 7) the kernel's, or the order of timing (the default is timed first)? Their SASS differ only in
# predicates and the order of the adds (224 instructions each, sm_90). Each explore twice: in order, then reversed.
source scripts/device/setup.sh
set -o pipefail
for f in "" "--fused"; do
  for r in "" "--reverse"; do
    timeout 45 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-decode-hot$f$r.json --shapes w4k-decode --const-n $f $r --regime graph-hot --budget 0.05 2>&1 | tail -4
  done
done
echo done
