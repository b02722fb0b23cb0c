# Session 8, call 1. (1) GPU bits of the chunk layouts (3 x 8192 at 20000, 2 x 8192 at 16384, float32 too).
# (2) Rows of 16K-24K columns: one pass over three chunks of 8192 against two passes and session 5's one pass,
# 1-4096 rows, both ops, graph-cold (session 7's plan). (3) The hidden size compiled in at large aligned
# shapes (the default with const_n; 16384 as two chunks of 8192, one pass or two): prediction 0-2% from const_n
# at 4096-8192 columns (the masks of one-block rows fold away), 5-8% at 4096x16384 from the two passes.
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "chunk or 16k or knobs" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-w16k.json --shapes w16k --const-n --budget 0.1 2>&1 | tail -11
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w16k-fused.json --shapes w16k --const-n --fused --budget 0.1 2>&1 | tail -11
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-aligned-constn.json --shapes aligned --const-n --budget 0.1 2>&1 | tail -10
echo done
