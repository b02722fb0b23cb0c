# Session 9, call 7. Shipped since call 6: the fused op's one block of 8192 16-bit columns with the hidden size
# compiled in (const_n). (1) The GPU bit tests of the knobs. (2) The fused sweep (graph-cold, cold-eager), decode
# rows (graph-hot) and fp16 sweep on it. (3) For the next session: rows of 4096 columns as two chunks of 2048 (8 warps),
# one pass and two, both ops, graph-cold at 1-65536 rows and graph-hot at decode rows (two passes over 2048 columns
# were 2.5-2.9% faster than the one block from 4096 rows in call 6; a same-bits one pass must hold at few rows).
source scripts/device/setup.sh
set -o pipefail
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "knobs or chunk_sum or 8192_only" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 200 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_sweep.json > $OUT/fs.log 2>&1; echo "fsweep rc=$?"
timeout 60 ridgeline bench fused_add_rmsnorm --shapes decode --regime graph-hot --budget 0.2 --json $OUT/bench_fused_decode.json > $OUT/fd.log 2>&1; echo "fdecode rc=$?"
python3 scripts/perf_tables.py $OUT/bench_fused_sweep.json $OUT/bench_fused_decode.json 2>&1 | grep -i "geometric"
for f in "" "--fused"; do
  timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-rows$f.json --shapes w4k-rows --const-n $f --budget 0.1 2>&1 | tail -10
  timeout 40 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-decode-hot$f.json --shapes w4k-decode --const-n $f --regime graph-hot --budget 0.05 2>&1 | tail -5
done
timeout 80 ridgeline bench fused_add_rmsnorm --shapes sweep --dtype fp16 --regime graph-cold --budget 0.15 --json $OUT/bench_fused_fp16.json > $OUT/ffp16.log 2>&1; echo "fp16 rc=$?"
python3 scripts/perf_tables.py $OUT/bench_fused_fp16.json 2>&1 | grep -i "geometric"
echo done
