# Session 9, call 6. Call 5: the fused op at 8192 columns with const_n was faster at every row count graph-cold
# (2-6%) and at decode rows graph-hot (even at 1 row), and at 128-256 rows of 4096 graph-hot (2.03 vs 2.07, 2.38 vs
# 2.54 us). Here: the fused op with const_n at 4096, 5120 and 7168 columns, graph-cold, every row count of the sweep.
source scripts/device/setup.sh
set -o pipefail
timeout 300 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-const-n.json --shapes fused-const-n --const-n --fused --budget 0.1 2>&1 | tail -16
echo done
