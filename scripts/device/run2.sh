# Call 2 on the H200: the rmsnorm sweep against the peers (auto regime), and a launch-config sweep.
source scripts/device/setup.sh
ridgeline probe --json > /dev/null
timeout 330 ridgeline bench rmsnorm --shapes sweep --budget 1.0 --json $OUT/bench_rmsnorm_sweep_auto.json > $OUT/bench_rmsnorm.log 2>&1; echo "bench rc=$?"; tail -5 $OUT/bench_rmsnorm.log
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore_plain_graphcold.json --budget 0.15 2>&1 | tail -20
