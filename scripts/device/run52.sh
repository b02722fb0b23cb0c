# Session 8, call 8 (the last 4-5 minutes of device time): the first half of next.sh. (1) hoist_loads' bits on the
# GPU. (2) The fused op with every piece's loads before the first store, at the chunked widths (8192 and 16384 as
# two chunks, the shipped 16K-24K chunks) and 5120's pieces, graph-cold, results written shape by shape. Prediction:
# hoisted chunks within 2% of the one block at 1-128 rows of 8192 and 16384 (4-10% behind without), and the
# shipped chunks and pieces 0-3% faster at one row, within 1% at 4096 rows.
source scripts/device/setup.sh
set -o pipefail
timeout 40 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "knobs or chunk_sum" 2>&1 | tee $OUT/pytest.log | tail -1
timeout 140 python3 scripts/explore_rmsnorm.py $OUT/explore-hoist-fused.json --shapes hoist-lite --const-n --hoist --fused --budget 0.05 2>&1 | tail -11
echo done
