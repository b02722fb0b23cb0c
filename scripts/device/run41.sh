# Ran at commit 674642e (the row_stages knob and explore --stages were reverted after this call: fdbb146).
# Session 7, call 1: does a software-pipelined persistent row loop (LaunchConfig.row_stages: async copies of the
# next rows into shared memory while this row is reduced) close the gap at large shapes, where a program's loads
# stop between one row's reduction and the next row's loads? Prediction: 2-5% at 16K-32K columns, where one
# program of 16 warps holds an SM (0.81-0.92x torch.compile), 0-3% at large 4096-16384 rows; nothing where one
# wave covers the rows. Then session 6's untested rules: stream hints cold-eager at 12-23 rows per SM, joint_max
# at 7168/16384 and in fp16.
source scripts/device/setup.sh
set -o pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore-stages.json --shapes stages --stages --budget 0.1 2>&1 | tail -12
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-stages-fused.json --shapes stages --stages --fused --budget 0.1 2>&1 | tail -12
timeout 70 python3 scripts/explore_rmsnorm.py $OUT/explore-stream-mid-ce.json --shapes stream-mid --focus --stream --regime cold-eager --budget 0.1 2>&1 | tail -5
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-joint-wide.json --shapes joint-wide --quant --focus --budget 0.05 2>&1 | tail -9
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-joint-fp16.json --shapes joint --quant --focus --dtype fp16 --budget 0.05 2>&1 | tail -11
echo done
