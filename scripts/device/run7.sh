# Call 7 on the H200 (after removing the row loop from the non-persistent kernel): GPU tests, decode and sweep
# benches of both ops against the peers, checks, host overhead. Ordered by priority; each step time-boxed.
source scripts/device/setup.sh
timeout 70 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_profile.py -m gpu 2>&1 | tail -3
for op in rmsnorm fused_add_rmsnorm; do
  timeout 50 ridgeline bench $op --shapes decode --regime graph-hot --budget 0.25 --json $OUT/bench_${op}_decode.json > /tmp/d_$op.log 2>&1; echo "decode $op rc=$?"
done
for op in rmsnorm fused_add_rmsnorm; do
  timeout 150 ridgeline bench $op --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_${op}_sweep.json > /tmp/s_$op.log 2>&1; echo "sweep $op rc=$?"
done
for op in rmsnorm fused_add_rmsnorm; do
  timeout 40 ridgeline check $op --dtype bf16 > /tmp/c_$op.log 2>&1; echo "check $op rc=$?"; tail -1 /tmp/c_$op.log
done
timeout 30 ridgeline bench rmsnorm --shapes 1x4096,1024x4096 --regime host --budget 0.4 --json $OUT/bench_rmsnorm_host.json > /tmp/h.log 2>&1; echo "host rc=$?"
