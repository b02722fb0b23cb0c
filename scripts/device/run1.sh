# Call 1 on the H200: probe, the whole test suite on CUDA, check both ops on every edge case.
source scripts/device/setup.sh
mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
ridgeline probe --refresh --json > $OUT/probe.json 2>$OUT/probe.err; ridgeline probe
python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee $OUT/pytest_all.log | tail -25
for op in rmsnorm fused_add_rmsnorm; do
  ridgeline check $op --json $OUT/check_$op.json > $OUT/check_$op.log 2>&1; echo "check $op rc=$?"; tail -2 $OUT/check_$op.log
done
