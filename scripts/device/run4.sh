# Call 4 on the H200: fast-launch test, host overhead per implementation, launch-config sweeps (plain and fused,
# graph-cold), the VRAM plan against the allocator, and a profile with Nsight Compute.
source scripts/device/setup.sh
{
python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tail -4
python3 scripts/host_overhead.py $OUT/host_overhead.json 2>&1 | tail -45
ridgeline vram Llama-3.1-8B --gpu auto --measure --json --out $OUT/vram_measure_llama8b.json > /dev/null 2>/tmp/vram.err; echo "vram rc=$?"; tail -3 /tmp/vram.err
timeout 120 ridgeline profile rmsnorm --impl ridgeline --shape 4096x4100 --ncu -o /tmp/prof --json $OUT/profile_rmsnorm_4096x4100.json 2>&1 | tail -30
} > $OUT/log.txt 2>&1
cat $OUT/log.txt | tail -80
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore_plain_graphcold.json --budget 0.1 2>&1 | tail -17
timeout 170 python3 scripts/explore_rmsnorm.py $OUT/explore_fused_graphcold.json --fused --budget 0.1 2>&1 | tail -17
