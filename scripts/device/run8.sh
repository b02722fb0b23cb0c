# Session 2, calls 1-2 on the H200: launch-config sweep of the new knobs (weight loaded before the reduction,
# loop-free rows, power-of-two row pieces, two-pass order / L2 hints, warps), both ops, graph-cold sweep and
# graph-hot decode; then where an eager call's host time goes.
source scripts/device/setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore-rmsnorm-sweep.json --budget 0.2 | tail -17
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-sweep.json --fused --budget 0.2 | tail -17
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-rmsnorm-decode.json --shapes decode-lite --regime graph-hot --budget 0.2 | tail -9
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-decode.json --fused --shapes decode-lite --regime graph-hot --budget 0.2 | tail -9
timeout 70 python3 scripts/host_breakdown.py $OUT/host-breakdown.json
