# Prepared at the end of session 8 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device/next.sh   (carry .whl)
# Session 8's last call (run52.sh, h200-explore-s8-hoist-fused.json) measured `hoist_loads` (the fused op loads every
# piece before the first residual_out store; no bit changes): 15-16% faster at one row of 5120 and 20000 columns,
# 1-1.6% at 4096 rows, and the hoisted chunks of 8192 columns at or ahead of the one block. Before a rule ships:
# (1) the GPU bit tests at real sizes (that call's test run was cut at 40 s); (2) the fused op hoisted or not at
# every piece layout (4100 and 5125 were not measured), graph-cold, and at decode rows graph-hot; (3) the plain op on
# the fixed code at 8192/16384 columns (session 8's call 2 ran a spilling division in its one-block rows) and decode
# rows of 8192 graph-hot, for a chunked rule there (two passes beyond ~8 rows per SM). Prediction: hoisted no slower
# anywhere (within 1% at 4100 and 5125), 10-16% faster at 1-16 rows of the chunked and piece widths.
# Then: hoist_loads in `launch_config` for the fused op's pieces and chunks, and both sweeps re-run (run50.sh).
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "knobs or chunk_sum or every_config" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-hoist-fused.json --shapes hoist --const-n --hoist --fused --budget 0.1 2>&1 | tail -17
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-hoist-fused-hot.json --shapes hoist-lite --hoist --fused --regime graph-hot --budget 0.05 2>&1 | tail -11
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k16k.json --shapes w8k16k --const-n --budget 0.1 2>&1 | tail -16
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k-decode-hot.json --shapes w8k-decode --const-n --regime graph-hot --budget 0.05 2>&1 | tail -5
echo done
