# Session 7, call 6 (the last minutes): the chunked layout narrowed to 24K-32K columns, both ops taking two passes
# beyond one row per SM. The GPU tests of the chunk-sum bits and the launch rules, then both ops benched beside
# the peers at 128-4096 rows of 24576-32768 columns (graph-cold).
source scripts/device/setup.sh
set -o pipefail
timeout 75 python3 -m pytest -q -p no:cacheprovider tests/test_rmsnorm_configs.py -k "chunk or 16k or knobs" 2>&1 | tee $OUT/pytest.log | tail -2
S=4096x24576,1024x32768,4096x32768,128x32768,256x32768
timeout 55 ridgeline bench rmsnorm --shapes $S --regime graph-cold --budget 0.15 --json $OUT/bench_rmsnorm_w32k.json > $OUT/w.log 2>&1; echo "rc=$?"
timeout 55 ridgeline bench fused_add_rmsnorm --shapes $S --regime graph-cold --budget 0.15 --json $OUT/bench_fused_w32k.json > $OUT/fw.log 2>&1; echo "rc=$?"
grep -i "geometric" $OUT/w.log $OUT/fw.log
echo done
