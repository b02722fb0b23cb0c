# Session 2, call 4 on the H200 (final kernel): the whole test suite on the GPU, then rmsnorm against the peers:
# sweep (graph-cold + cold-eager), decode (graph-hot), host time per eager call.
source scripts/device/setup.sh
set -o pipefail
timeout 210 python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee $OUT/pytest-all.log | tail -4
timeout 170 ridgeline bench rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_rmsnorm_sweep.json > /tmp/s.log 2>&1; echo "sweep rc=$?"
timeout 60 ridgeline bench rmsnorm --shapes decode --regime graph-hot --budget 0.25 --json $OUT/bench_rmsnorm_decode.json > /tmp/d.log 2>&1; echo "decode rc=$?"
timeout 40 ridgeline bench rmsnorm --shapes 1x4096,1024x4096 --regime host --budget 0.4 --json $OUT/bench_rmsnorm_host.json > /tmp/h.log 2>&1; echo "host rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_sweep.json $OUT/bench_rmsnorm_decode.json 2>&1 | grep -i "geometric" 
