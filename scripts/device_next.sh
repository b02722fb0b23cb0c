# Prepared at the end of session 7 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device_next.sh   (carry .whl)
# Rows of 16K-24K columns: the plain op trails torch.compile at large M (0.87x at 4096x20000). Session 7 measured
# the fix's two-pass side (8192-column chunks, 16 warps, hidden size compiled in: 81.8 us plain, 166.7 fused with the
# second pass reversed, at 4096x20000) but not its one-pass partner for few rows: three chunks of 8192 summed
# elementwise (`chunked_candidates`, 79-82 registers weight first, 58-63 after, compiled for sm_90). (1) Its bits
# against the two-pass side on the GPU (test_chunk_sum_one_pass_gives_the_two_pass_bits runs real sizes there).
# (2) One pass and two at 1-4096 rows of 16896 and 20000 columns, both ops, graph-cold, and decode rows graph-hot.
# Prediction: one pass within 3% of today's at up to one row per SM, two passes at the best peer beyond; the fused
# op at 2048x16896 is the risk (two passes 76.2 vs 71.4 us today). If both hold: a rule like chunked_config's for
# 16K-24K columns, then the w32k bench of session 7 (device_run45.sh's shapes) for both ops.
source scripts/device_setup.sh
set -o pipefail
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "chunk or 16k or knobs" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-w16k.json --shapes w16k --const-n --budget 0.1 2>&1 | tail -11
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w16k-fused.json --shapes w16k --const-n --fused --budget 0.1 2>&1 | tail -11
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w16k-hot.json --shapes w16k --const-n --regime graph-hot --budget 0.05 2>&1 | tail -11
echo done
