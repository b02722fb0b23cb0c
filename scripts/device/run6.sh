# Call 6 on the H200: the fused_add_rmsnorm sweep and decode, host overhead as a regime, GPU profile tests.
source scripts/device/setup.sh
timeout 330 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.5 \
  --json $OUT/bench_fused_sweep.json > $OUT/bench_fused_sweep.log 2>&1; echo "sweep rc=$?"
timeout 120 ridgeline bench fused_add_rmsnorm --shapes decode --regime graph-hot --budget 0.3 \
  --json $OUT/bench_fused_decode.json > /tmp/fd.log 2>&1; echo "decode rc=$?"
timeout 60 ridgeline bench rmsnorm --shapes 1x4096,1024x4096 --regime host --budget 0.5 \
  --json $OUT/bench_rmsnorm_host.json > /tmp/h.log 2>&1; echo "host rc=$?"; tail -14 /tmp/h.log
timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_profile.py 2>&1 | tail -3
tail -3 $OUT/bench_fused_sweep.log
