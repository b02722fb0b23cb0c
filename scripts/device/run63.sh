# Session 10, call 1 (next.sh part A). (0) Every GPU-marked test and the knob bit tests: session 9's last code changes
# have not run on the GPU. (1) The settled 4096-column explores, plain and fused, with N compiled in and hoisted loads
# (the fused one block's weight before its residual_out store; hoisted fused chunks), decode rows graph-hot and row
# sweeps graph-cold.
source scripts/device/setup.sh
set -o pipefail
timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests 2>&1 | tee $OUT/pytest-gpu.log | tail -3
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "knobs or chunk_sum" 2>&1 | tee $OUT/pytest-knobs.log | tail -2
for f in "" "--fused"; do
  timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-decode-hot$f.json --shapes w4k-decode --const-n --hoist $f --regime graph-hot --budget 0.05 2>&1 | tail -5
  timeout 90 python3 scripts/explore_rmsnorm.py $OUT/explore-w4k-rows$f.json --shapes w4k-rows --const-n --hoist $f --budget 0.1 2>&1 | tail -10
done
echo done
