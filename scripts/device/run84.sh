# Session 12, call 7: cold-eager at the plain op's wide shapes, where torch.compile leads after the L2 flush
# (call 6: 4096x7168 32.51 vs 34.54 us, 16384x8192 128.51 vs 133.82) though graph-cold they tie or we lead. The hint
# variants and torch.compile's layouts (two loops over 1K-4K-column chunks, --two-pass), cold-eager and graph-cold.
source scripts/device/setup.sh
set -o pipefail
E="python3 scripts/explore_rmsnorm.py"
timeout 150 $E $OUT/wide-eager-2pass.json --shapes plain-lost-eager --ab-stream-loads --two-pass --regime cold-eager --budget 0.1 2>&1 | tail -4
timeout 150 $E $OUT/wide-cold-2pass.json --shapes plain-lost-eager --ab-stream-loads --two-pass --shared-out --budget 0.1 2>&1 | tail -4
echo done
