# Session 12, call 10: call 9's ncu put torch.compile's lead at 4096x7168 after a flush on occupancy (its 16 warps at
# 32 registers: 89% achieved; our one block of 8192 over 8 warps at 62 registers: 45%). The plain op's 7168 over 16
# warps (other bits), hint variants, graph-cold and cold-eager.
source scripts/device/setup.sh
set -o pipefail
E="python3 scripts/explore_rmsnorm.py"
timeout 80 $E $OUT/w7k-16w.json --shapes w7k-16w --ab-stream-loads --warps 16 --shared-out --budget 0.1 2>&1 | tail -1
timeout 80 $E $OUT/w7k-16w-eager.json --shapes w7k-16w --ab-stream-loads --warps 16 --regime cold-eager --budget 0.1 2>&1 | tail -1
echo done
