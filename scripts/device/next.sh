# Prepared at the end of session 10 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device/next.sh   (carry .whl)
# What session 10 left open (docs/perf/rmsnorm.md, "Session 10"):
# (1) the fused op's rows of 7168: one block of 16 warps with hoisted loads took 1x7168 from 2.62 to 2.42 us graph-cold,
#     but session 10's explore stopped after that shape. Every candidate at 128, 1024 and 4096 rows (shape set w7k-mid;
#     the explore writes its JSON after each shape, so a time limit keeps the finished ones). 4096x7168 is 0.98-0.99x
#     the best peer for both ops.
# (2) the fused op at 128x4096, graph-cold: 2.72 us against torch.compile's 2.57-2.59 in three runs. Every candidate
#     of ours there (and at 64 and 256 rows) to see whether any layout reaches it, before reading torch.compile's kernel
#     (TORCH_LOGS=output_code) for what it does differently.
# (3) the fused op with an fp32 weight at 4096 columns: since session 10 its chunks of 2048 keep their hoisted loads
#     where the weight is loaded first (up to 2 rows per SM), chosen without a measurement (unhoisted, with a 16-bit
#     weight, they lost 7-19% at 1-256 rows); hoisted against not, graph-hot and graph-cold, and the GPU zone tests.
# ~6 minutes of device time.
source scripts/device/setup.sh
set -o pipefail
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-w7k-mid-fused.json --shapes w7k-mid --hoist --fused --budget 0.05 2>&1 | tail -5
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-128.json --shapes fused-128 --hoist --const-n --fused --budget 0.1 2>&1 | tail -5
TORCH_LOGS=output_code timeout 60 ridgeline bench fused_add_rmsnorm --impl torch-compile --shapes 128x4096 --regime graph-cold --budget 0.1 > $OUT/torch-compile-fused-128.log 2>&1; echo "tc code rc=$?"
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-wfp32-w4k-decode-hot-fused.json --shapes w4k-decode --wdtype fp32 --const-n --hoist --fused --regime graph-hot --budget 0.05 2>&1 | tail -5
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-wfp32-w4k-small-fused.json --shapes w4k-small --wdtype fp32 --const-n --hoist --fused --budget 0.1 2>&1 | tail -4
timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_rmsnorm_configs.py -k 4096 2>&1 | tail -2
echo done
