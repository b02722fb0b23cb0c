# Session 10, call 9. The fp32 weight now keeps the 4096-column zones of stream hints and two passes (call 8): the
# large-row bench beside the bf16 weight again, and the zone tests on the GPU.
source scripts/device/setup.sh
set -o pipefail
timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_rmsnorm_configs.py -k 4096 2>&1 | tail -2
timeout 70 ridgeline bench rmsnorm --impl ridgeline --impl liger --shapes 1024x4096,4096x4096,16384x4096,65536x4096,4096x8192 --variant "" --variant w-fp32 --regime graph-cold --budget 0.15 --json $OUT/bench_rmsnorm_wfp32_large.json > $OUT/wfp32l.log 2>&1; echo "wfp32 large rc=$?"
python3 scripts/perf_tables.py $OUT/bench_*.json 2>&1 | grep -E "^\| [0-9]|Geometric"
echo done
