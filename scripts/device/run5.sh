# Call 5 on the H200: wide-row launch configs, then the rmsnorm sweep (graph-cold and cold-eager) and decode
# (graph-hot) against every available peer.
source scripts/device/setup.sh
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore_wide_graphcold.json --shapes wide --budget 0.1 2>&1 | tail -3
timeout 330 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.5 \
  --json $OUT/bench_rmsnorm_sweep.json > $OUT/bench_rmsnorm_sweep.log 2>&1; echo "sweep rc=$?"
timeout 150 ridgeline bench rmsnorm --shapes decode --regime graph-hot --budget 0.3 \
  --json $OUT/bench_rmsnorm_decode.json > $OUT/bench_rmsnorm_decode.log 2>&1; echo "decode rc=$?"
tail -4 $OUT/bench_rmsnorm_sweep.log; tail -4 $OUT/bench_rmsnorm_decode.log
