# Session 10, call 2 (next.sh part B). The settled 8192-column explores, plain and fused (N compiled in, hoisted
# loads), decode rows graph-hot and row sweeps graph-cold; the fused op's 7168 hoisted.
source scripts/device/setup.sh
set -o pipefail
for f in "" "--fused"; do
  timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k-decode-hot$f.json --shapes w8k-decode --const-n --hoist $f --regime graph-hot --budget 0.05 2>&1 | tail -5
  timeout 90 python3 scripts/explore_rmsnorm.py $OUT/explore-w8k-rows$f.json --shapes w8k-rows --const-n --hoist $f --budget 0.1 2>&1 | tail -10
done
timeout 60 python3 scripts/explore_rmsnorm.py $OUT/explore-w7k-rows-fused.json --shapes w7k-rows --hoist --fused --budget 0.1 2>&1 | tail -7
echo done
