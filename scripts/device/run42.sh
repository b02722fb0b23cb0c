# Session 7, call 2: what torch.compile runs where it leads (plain rows of 16K-32K columns at large M; the fused op
# at 16x4096, graph-cold): its Triton source and compiled kernels (PTX, cubin) for an offline diff against ours;
# every candidate layout of ours for the fused op at 1-64 rows of 4096 (do warps or loops matter there?); a fresh
# fused bf16 sweep on the final code.
source scripts/device/setup.sh
set -o pipefail
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
export TORCHINDUCTOR_CACHE_DIR=/tmp/indc
timeout 100 python3 scripts/inductor_code.py $OUT/inductor 4096x24576 4096x16384 4096x4096 2>&1 | tail -3
timeout 60 python3 scripts/inductor_code.py $OUT/inductor 16x4096 1x4096 --fused 2>&1 | tail -2
mkdir -p $OUT/inductor-art
find /tmp/indc \( -name "*.cubin" -o -name "*.ptx" -o -name "*.best_config" -o -name "*.json" \) -size -2M | while read f; do cp "$f" "$OUT/inductor-art/$(basename $(dirname "$f"))-$(basename "$f")"; done
ls $OUT/inductor-art | wc -l
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-small-fused.json --shapes small --fused --budget 0.1 2>&1 | tail -4
timeout 170 ridgeline bench fused_add_rmsnorm --shapes sweep --regime graph-cold --regime cold-eager --budget 0.3 --json $OUT/bench_fused_sweep.json > $OUT/fused.log 2>&1; echo "fused rc=$?"
tail -45 $OUT/fused.log | grep -i "geomet\|16x4096"
echo done
