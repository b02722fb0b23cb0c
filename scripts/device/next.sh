# Prepared at the end of session 10 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device/next.sh   (carry .whl)
# What session 10 left open (docs/perf/rmsnorm.md, "Session 10"):
# (1) the fused op's rows of 7168: one block of 16 warps with hoisted loads took 1x7168 from 2.62 to 2.42 us graph-cold,
#     but the explore stopped after that shape; every candidate at 128, 1024 and 4096 rows (shape set w7k-mid; the explore writes its
#     JSON after each shape, so a time limit keeps the finished ones). 4096x7168 is 0.98-0.99x the best peer for both ops.
# (2) an fp32 weight at 256x8192 (two rows per SM): 3.22 us against 2.98 with a bf16 weight; the weight held with x
#     costs occupancy there. The explore's focus set times the weight first / after with and without a register cap.
# (3) the fused op at 16-128 rows of 4096, graph-cold, where torch.compile's figure moved between 2.10 and 2.67 us
#     across runs (ours 2.23-2.26): the peers twice in one process, to see whether its fast figure is reproducible.
# ~6 minutes of device time.
source scripts/device/setup.sh
set -o pipefail
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-w7k-rows-fused.json --shapes w7k-mid --hoist --fused --budget 0.05 2>&1 | tail -5
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-wfp32-8k.json --shapes w8k-decode --wdtype fp32 --focus --regime graph-hot --budget 0.05 2>&1 | tail -5
for i in 1 2; do
  timeout 60 ridgeline bench fused_add_rmsnorm --shapes 1x4096,16x4096,128x4096 --regime graph-cold --budget 0.2 --json $OUT/bench_fused_small_$i.json > $OUT/fsmall$i.log 2>&1; echo "fused small $i rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_fused_small_*.json 2>&1 | grep -E "^\| [0-9]"
echo done
