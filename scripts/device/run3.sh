# Call 3 on the H200: GPU tests after the launch/alignment changes, checks, launch-config sweeps, host overhead,
# and the VRAM plan measured against the allocator.
source scripts/device/setup.sh
python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py tests/test_rmsnorm_kernels.py tests/test_bench_cpu.py tests/test_cli.py 2>&1 | tee $OUT/pytest_gpu.log | tail -4
for op in rmsnorm fused_add_rmsnorm; do
  ridgeline check $op --json $OUT/check_$op.json > $OUT/check_$op.log 2>&1; echo "check $op rc=$?"; tail -1 $OUT/check_$op.log
done
python3 scripts/host_overhead.py $OUT/host_overhead.json 2>&1 | tail -40
ridgeline vram Llama-3.1-8B --gpu auto --measure --json > $OUT/vram_measure_llama8b.json 2>$OUT/vram.err; echo "vram rc=$?"; tail -3 $OUT/vram.err
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore_fused_graphcold.json --fused --budget 0.12 2>&1 | tail -17
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore_plain_graphcold.json --budget 0.12 2>&1 | tail -17
