# Session 10, call 6. Call 5's fused decode timed 64x4096 at 2.44 us (IQR 0.73, samples 2.35-7.1) between 32x (1.80)
# and 128x (2.12), while the in-place variant of the same op ran 1.84. Is it the new config (chunks of 2048, hoisted)
# at 64 rows or a disturbed timing? (1) The fused decode bench again at 32-128 rows. (2) Explore graph-hot at 32-96 rows.
source scripts/device/setup.sh
set -o pipefail
timeout 60 ridgeline bench fused_add_rmsnorm --shapes 32x4096,64x4096,128x4096 --regime graph-hot --budget 0.15 --json $OUT/bench_fused_decode64.json > $OUT/fd.log 2>&1; echo "fdecode rc=$?"
python3 scripts/perf_tables.py $OUT/bench_fused_decode64.json 2>&1 | grep -E "^\| [0-9]"
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-64-hot-fused.json --shapes w4k-64 --const-n --hoist --fused --regime graph-hot --budget 0.05 2>&1 | tail -5
echo done
