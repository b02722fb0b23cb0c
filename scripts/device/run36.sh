# Session 6, call 3: the shipped rules (stream hints for the plain op up to 5120 columns beyond 8 rows per SM;
# joint_max for the plain dynamic FP8 op up to 16 rows per SM) benched beside the peers; the same knobs at the
# shapes the rules leave out (unaligned rows, pieces), and their bits on the GPU.
source scripts/device/setup.sh
set -o pipefail
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "fp8 or knob" 2>&1 | tail -3
timeout 80 python3 scripts/explore_rmsnorm.py $OUT/explore-stream-odd.json --shapes stream-odd --focus --stream --budget 0.05 2>&1 | tail -9
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-joint-odd.json --shapes joint-odd --quant --focus --budget 0.05 2>&1 | tail -10
timeout 120 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_sweep.json > $OUT/rms.log 2>&1; echo "rmsnorm rc=$?"; grep -i "geometric\|failures" $OUT/rms.log | tail -3
timeout 90 ridgeline bench rmsnorm_dynamic_quant --impl ridgeline --impl torch-compile --shapes sweep --regime graph-cold --budget 0.08 --json $OUT/bench_dq_sweep.json > $OUT/dq.log 2>&1; echo "dq rc=$?"
timeout 60 ridgeline bench rmsnorm_dynamic_quant --impl ridgeline --impl torch-compile --shapes decode --regime graph-hot --budget 0.1 --json $OUT/bench_dq_decode.json > $OUT/dqd.log 2>&1; echo "dq decode rc=$?"
