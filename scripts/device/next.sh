# Prepared at the end of session 8 for the next GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device/next.sh   (carry .whl)
# Session 8 found two passes with the hidden size compiled in 2-5% faster at many rows of 4096-16384 columns, but
# their one-pass partner (the row as equal chunks) lost 4-10% at one row for the fused op, whose compiled kernel
# issues a piece's loads only after the previous piece's residual_out store (`_load_piece`, start to end). The
# `hoist_loads` knob loads every piece first (sm_90: the 16384-column fused chunks' eight loads at SASS 33-44, the
# first store at 101; before: 33-38, store at 77, then 79-83), changing no bit. (1) Its bits on the GPU. (2) The
# fused op, hoisted or not, at the chunked widths and the pieces of 4100-5125 columns, graph-cold. Prediction:
# hoisted chunks within 2% of the one block at 1-128 rows of 8192 and 16384 (today 4-10% behind), and the shipped
# 16K-24K chunks and 5120's pieces 0-3% faster at 1-128 rows, within 1% at 4096. (3) The plain op on the fixed code
# (call 2's one-block rows ran a division that spilled) and decode rows of 8192 graph-hot. If the chunks hold at
# few rows: rules for 8192 and 16384 like `chunked_config`'s (two passes beyond ~8 rows per SM), then both sweeps.
source scripts/device/setup.sh
set -o pipefail
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "knobs or chunk_sum or every_config" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-hoist-fused.json --shapes hoist --const-n --hoist --fused --budget 0.1 2>&1 | tail -17
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k16k.json --shapes w8k16k --const-n --budget 0.1 2>&1 | tail -16
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k-decode-hot.json --shapes w8k-decode --const-n --regime graph-hot --budget 0.05 2>&1 | tail -5
echo done
