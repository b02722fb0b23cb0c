# Session 5, call 6: why torch.compile leads the plain op at 16K-32K columns: the config its autotuner picks
# (the .best_config files inductor caches), and our two-pass kernel over small chunks with 8-16 warps there.
source scripts/device_setup.sh
set -o pipefail
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind
timeout 150 python3 scripts/inductor_code.py /tmp/indcode 4096x32768 4096x24576 4096x20000 1024x32768 > /tmp/ind.log 2>&1; echo "inductor rc=$?"
for f in $(find /tmp/ind -name "*.best_config"); do d=$(dirname $f); echo "$(grep -ho "size_hints={[^}]*}" $d/*.py | head -1) $(cat $f)"; done | tee $OUT/inductor-best-configs.txt
timeout 200 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-two-pass.json --shapes w32k --focus --two-pass --budget 0.06 2>&1 | tail -9
