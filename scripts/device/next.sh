# Prepared at the end of session 11 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device/next.sh   (carry .whl)
# What session 11 left open (docs/perf/rmsnorm.md, "Session 11"):
# (1) Full stream hints beyond the L2 share. In session 11's A/B (outputs shared, as the bench writes them) they beat
#     no hint at the shapes the sweep still loses to torch.compile: plain 4096x7168 29.89 vs 30.76 us (torch.compile
#     30.02-30.19), 4096x8192 34.10 vs 34.67 (33.94), 3072x8192 26.13 vs 26.67; fused 4096x7168 58.66 vs 58.86. Session
#     6 had measured the opposite at 4096x8192 with separate outputs, and stream hints cost cold-eager time at 16384+
#     rows of 4096 then. The A/B again, graph-cold and cold-eager, at 7168 and 8192 from 2048 to 16384 rows.
# (2) The FP8 epilogues with stream_loads (the dynamic one here, `--quant`) (not measured; config_for leaves them out): the A/B at small shapes.
# (3) Host time per eager call (the cold-eager small cells of session 11 carried 45-60 us of host time against
#     19-27 us measured before): the host regime for both ops.
# ~6 minutes of device time.
source scripts/device/setup.sh
set -o pipefail
E="python3 scripts/explore_rmsnorm.py"
timeout 120 $E $OUT/ab-wide-plain.json --shapes l2-beyond --ab-stream-loads --shared-out --budget 0.1 2>&1 | tail -1
timeout 150 $E $OUT/ab-wide-fused.json --shapes l2-beyond --ab-stream-loads --fused --shared-out --budget 0.1 2>&1 | tail -1
timeout 90 $E $OUT/ab-wide-plain-eager.json --shapes l2-beyond --ab-stream-loads --regime cold-eager --budget 0.1 2>&1 | tail -1
timeout 60 $E $OUT/ab-fp8-dynamic.json --shapes fused-small --ab-stream-loads --quant --shared-out --budget 0.05 2>&1 | tail -1
timeout 60 $E $OUT/ab-fp8-dynamic-fused.json --shapes fused-small --ab-stream-loads --quant --fused --shared-out --budget 0.05 2>&1 | tail -1
for op in rmsnorm fused_add_rmsnorm; do
  timeout 60 ridgeline bench $op --shapes 1x4096,16x4096,1024x4096,4096x4096 --regime host --budget 0.2 --json $OUT/host_$op.json > $OUT/host_$op.log 2>&1; echo "$op host rc=$?"
done
echo done
