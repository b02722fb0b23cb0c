# Session 10, call 4. Rows of 4096 columns as two chunks of 2048 (one pass few rows, two passes many: the same bits)
# won 2-3% at 16384-65536 rows for both ops and 1.5-3.8% for the fused op at 1024-4096 rows (calls 1), but the plain
# op's one pass over chunks lost 3-4% at 4096x4096 to the shipped one block with stream hints. (1) Graph-cold, 2048-8192
# rows: the chunks with stream hints too (--stream). (2) Cold-eager (the sweep's other regime) at 4096-65536 rows.
source scripts/device/setup.sh
set -o pipefail
for f in "" "--fused"; do
  timeout 75 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-mid$f.json --shapes w4k-mid --const-n --stream $f --budget 0.1 2>&1 | tail -4
  timeout 100 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-large-eager$f.json --shapes w4k-large --const-n $f --regime cold-eager --budget 0.1 2>&1 | tail -4
done
echo done
