# Session 8, call 3. The sum's order now spelled out (fma chained chunk by chunk) and 1/N rounded once on the host
# (rstd_of): (1) the GPU tests of the launch rules and kernels, with the chunk bits (one pass = two passes, N compiled
# in or not, float32 too) that failed in calls 1-2. (2) Rows of 16K-24K columns, now three chunks of 8192 (one pass),
# benched beside the peers, both ops, graph-cold. Prediction (call 1): plain 1.0-1.15x the best peer at every shape
# (4096x20000 ~82 us against torch.compile's ~81-82), fused 1.0x or better except 1x16896 (~4.2 vs 4.0 us before).
# (3) Decode shapes graph-hot, both ops: every config there changed code (the FFMA by 1/N instead of the division).
source scripts/device/setup.sh
set -o pipefail
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py tests/test_rmsnorm_kernels.py 2>&1 | tee $OUT/pytest.log | tail -2
S=1x20000,16x20000,128x20000,256x20000,1024x20000,4096x20000,1x16896,256x16896,2048x16896,4096x16896
timeout 70 ridgeline bench rmsnorm --shapes $S --regime graph-cold --budget 0.15 --json $OUT/bench_rmsnorm_w16k.json > $OUT/w.log 2>&1; echo "rc=$?"
timeout 70 ridgeline bench fused_add_rmsnorm --shapes $S --regime graph-cold --budget 0.15 --json $OUT/bench_fused_w16k.json > $OUT/fw.log 2>&1; echo "rc=$?"
timeout 60 ridgeline bench rmsnorm --shapes decode --regime graph-hot --budget 0.2 --json $OUT/bench_rmsnorm_decode.json > $OUT/d.log 2>&1; echo "decode rc=$?"
timeout 60 ridgeline bench fused_add_rmsnorm --shapes decode --regime graph-hot --budget 0.2 --json $OUT/bench_fused_decode.json > $OUT/fd.log 2>&1; echo "fdecode rc=$?"
python3 scripts/perf_tables.py $OUT/bench_rmsnorm_w16k.json $OUT/bench_fused_w16k.json $OUT/bench_rmsnorm_decode.json $OUT/bench_fused_decode.json > $OUT/tables.md 2>&1
grep -i "geometric" $OUT/tables.md
echo done
