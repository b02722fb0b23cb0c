# Session 12, call 11: call 10's 16 warps at 7168 held the weight first (more registers); here with the focus set
# (weight first or after, 32-register cap or none) at 8 and 16 warps, graph-cold and cold-eager.
source scripts/device/setup.sh
set -o pipefail
E="python3 scripts/explore_rmsnorm.py"
timeout 70 $E $OUT/w7k-16w-focus.json --shapes w7k-16w --focus --warps 16 --shared-out --budget 0.1 2>&1 | tail -1
timeout 70 $E $OUT/w7k-16w-focus-eager.json --shapes w7k-16w --focus --warps 16 --regime cold-eager --budget 0.1 2>&1 | tail -1
echo done
