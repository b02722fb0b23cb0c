# Session 12, call 9: Nsight Compute on ours and torch.compile's kernel at 4096x7168 (ncu flushes the caches before
# each kernel: the cold-eager regime, where torch.compile leads, 32.51 vs 34.54 us in call 6): DRAM bytes, time,
# throughput, occupancy of each.
source scripts/device/setup.sh
set -o pipefail
for impl in ridgeline torch-compile; do
  timeout 110 ridgeline profile rmsnorm --impl $impl --shape 4096x7168 --ncu --no-kineto --json $OUT/prof_$impl.json --out /tmp/prof_$impl > $OUT/prof_$impl.log 2>&1; echo "$impl rc=$?"
  tail -25 $OUT/prof_$impl.log
done
echo done
