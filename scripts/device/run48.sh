# Session 8, call 2. (1) GPU bits: one pass and two over equal chunks at 16384, 20000, 24576 (float32 too), with the
# hidden size compiled in or not (rstd_of), and the shipped 16K-24K rule (three chunks of 8192) batch invariant.
# (2) 8192 and 16384 columns as two equal chunks (4096 / 8192, 16 warps), one pass or two, against the shipped one
# block, 1-16384 rows, plain and fused, graph-cold; decode rows of 8192 graph-hot. Prediction: two passes 2-3% faster
# from ~31 rows per SM (call 1: 4096x8192 34.35 vs 34.99, 16384x8192 127.78 vs 131.12, 4096x16384 65.86 vs 69.49),
# the one pass over chunks within 1% of the one block at few rows. (3) 4096 columns: two passes over 2048-column
# chunks with N compiled in (torch.compile's layout there), 4096-65536 rows.
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "chunk or 16k or knobs" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k16k.json --shapes w8k16k --const-n --budget 0.1 2>&1 | tail -16
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k16k-fused.json --shapes w8k16k-fused --const-n --fused --budget 0.1 2>&1 | tail -10
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k-decode-hot.json --shapes w8k-decode --const-n --regime graph-hot --budget 0.05 2>&1 | tail -5
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-large.json --shapes w4k-large --const-n --budget 0.1 2>&1 | tail -4
echo done
