# Session 9, call 10. time_graph now settles (two discarded timings before the first kept one in a process). (1) The
# bias check again: the first kept timing should now match the later ones. (2) Both decode sets (graph-hot) again:
# their first shape, 1x4096 with ours timed first, was flattered by the fast first timings (records up to session 9).
source scripts/device/setup.sh
# (at b294720: settled by default)
timeout 40 python3 scripts/first_timing_bias.py $OUT/first-timing-bias-settled.json 2>&1 | tail -8
timeout 75 ridgeline bench rmsnorm --shapes decode --regime graph-hot --budget 0.15 --json $OUT/bench_rmsnorm_decode.json > $OUT/d.log 2>&1; echo "decode rc=$?"
timeout 75 ridgeline bench fused_add_rmsnorm --shapes decode --regime graph-hot --budget 0.15 --json $OUT/bench_fused_decode.json > $OUT/fd.log 2>&1; echo "fdecode rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_decode.json $OUT/bench_fused_decode.json 2>&1 | grep -i "geometric\|^| 1x\|^| 2x"
echo done
