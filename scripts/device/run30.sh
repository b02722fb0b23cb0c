# Session 5, call 6: the tests call 5 failed (the explore smoke test under Triton 3.6's interpreter, now shimmed;
# a workspace lookup written for the CPU); then why torch.compile leads the plain op at 16K-32K columns: the
# config its autotuner picks (the .best_config files inductor caches), and our two-pass kernel over small chunks.
source scripts/device/setup.sh
set -o pipefail
timeout 150 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 tests/test_rmsnorm_configs.py -k "explore_script or one_program_per_row or 16k_to_32k" 2>&1 | tee $OUT/pytest-c.log | tail -3
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind
timeout 120 python3 scripts/inductor_code.py /tmp/indcode 4096x32768 4096x24576 4096x20000 > /tmp/ind.log 2>&1; echo "inductor rc=$?"
for f in $(find /tmp/ind -name "*.best_config"); do d=$(dirname $f); echo "$(grep -ho "size_hints={[^}]*}" $d/*.py | head -1) $(cat $f)"; done | tee $OUT/inductor-best-configs.txt
timeout 150 python3 scripts/explore_rmsnorm.py $OUT/explore-w32k-two-pass.json --shapes w32k-lite --focus --two-pass --budget 0.05 2>&1 | tail -6
