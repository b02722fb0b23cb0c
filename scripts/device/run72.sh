# Session 10, call 10 (part of next.sh, within the device time left). (1) An fp32 weight at decode rows of 8192
# (256x8192: 3.22 us against 2.98 with a bf16 weight): weight first or after, capped or not, graph-hot. (2) The fused
# op at 1-128 rows of 4096, graph-cold, twice in one process each: is torch.compile's 2.10 us at 16x4096 (call 5;
# 2.67 in session 9) reproducible?
source scripts/device/setup.sh
set -o pipefail
timeout 45 python3 scripts/explore_rmsnorm.py $OUT/explore-wfp32-8k.json --shapes w8k-decode --wdtype fp32 --focus --regime graph-hot --budget 0.05 2>&1 | tail -5
for i in 1 2; do
  timeout 45 ridgeline bench fused_add_rmsnorm --shapes 1x4096,16x4096,128x4096 --regime graph-cold --budget 0.2 --json $OUT/bench_fused_small_$i.json > $OUT/fsmall$i.log 2>&1; echo "fused small $i rc=$?"
done
python3 scripts/perf_tables.py $OUT/bench_fused_small_*.json 2>&1 | grep -E "^\| [0-9]"
echo done
