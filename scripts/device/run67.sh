# Session 10, call 5. The rules shipped from calls 1-4: rows of 4096 16-bit columns as two chunks of 2048 (one pass
# up to 32 rows per SM, two beyond; zones for the weight, stream hints, const_n, hoisted loads), the plain op's one
# block of 8192 with N compiled in from 2 rows per SM. (0) The GPU tests of the launch rules (new: batch invariance
# across the 4096-column zones). (1) Both sweeps (graph-cold and cold-eager) and both decode sets (graph-hot).
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_rmsnorm_configs.py tests/test_gpu.py 2>&1 | tee $OUT/pytest-gpu-rules.log | tail -3
timeout 170 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_sweep.json > $OUT/s.log 2>&1; echo "sweep rc=$?"
timeout 170 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_sweep.json > $OUT/fs.log 2>&1; echo "fsweep rc=$?"
timeout 60 ridgeline bench rmsnorm --shapes decode --regime graph-hot --budget 0.15 --json $OUT/bench_rmsnorm_decode.json > $OUT/d.log 2>&1; echo "decode rc=$?"
timeout 60 ridgeline bench fused_add_rmsnorm --shapes decode --regime graph-hot --budget 0.15 --json $OUT/bench_fused_decode.json > $OUT/fd.log 2>&1; echo "fdecode rc=$?"
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -i "geometric"
echo done
