# Session 7, call 3: (1) scripts/two_pass_ladder.py: inductor's own two-pass kernel (its generated source, launched
# here with its autotuned config) beside a minimal two-pass kernel changed one knob at a time, and ours, at
# 4096 x 16K-32K columns, graph-cold. Prediction: a constant hidden size (loops unrolled, statically masked loads
# dropped) explains most of the gap. (2) The fused op at 1-64 rows of 4096 with and without stream hints. (3) The
# GPU and kernel test files (last run at f1c8481; kernel code unchanged since, launch rules and tests changed).
source scripts/device/setup.sh
set -o pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
export TORCHINDUCTOR_CACHE_DIR=/tmp/indc
timeout 180 python3 scripts/two_pass_ladder.py $OUT/two-pass-ladder.json --budget 0.15 2>&1 | grep -v Warning | tail -60
timeout 40 python3 scripts/explore_rmsnorm.py $OUT/explore-small-fused-stream.json --shapes small --fused --focus --stream --budget 0.1 2>&1 | tail -4
timeout 320 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_gpu.py tests/test_gpu_split.py tests/test_rmsnorm_kernels.py tests/test_rmsnorm_fp8.py tests/test_rmsnorm_configs.py tests/test_profile.py 2>&1 | tee $OUT/pytest.log | grep -v "^  File\|^Thread" | tail -4
echo done
