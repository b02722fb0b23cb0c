# Session 9 call 1 (next.sh, first half): the GPU bit tests at real sizes and the fused op hoisted or not, graph-cold.
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "knobs or chunk_sum or every_config" 2>&1 | tee $OUT/pytest.log | tail -2
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-hoist-fused.json --shapes hoist --const-n --hoist --fused --budget 0.1 2>&1 | tail -17
echo done
