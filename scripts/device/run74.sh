# Session 11, call 3: torch.compile's two candidate configs for the RMSNorm peers, each forced, in the bench's own
# graph-cold regime beside ours (which of them gives its 2.10 / 2.56 us at the fused op's 16 / 128 rows of 4096);
# and our two-pass candidates shaped like inductor's (16 warps, 2048-column chunks, with and without L2 hints) with
# shared outputs, as the bench writes them.
source scripts/device/setup.sh
set -o pipefail
export TORCHINDUCTOR_COMPILE_THREADS=1
F="1x4096,16x4096,128x4096,256x4096,1024x8192"
for R in 4096 2048; do
  timeout 120 python3 scripts/device/inductor_forced.py $R bench fused_add_rmsnorm --impl ridgeline --impl torch-compile --shapes $F --regime graph-cold --budget 0.2 --json $OUT/fused-tc-r$R.json > $OUT/fused-tc-r$R.log 2>&1; echo "fused R=$R rc=$?"
done
timeout 120 python3 scripts/device/inductor_forced.py 8192 bench fused_add_rmsnorm --impl torch-compile --shapes 1024x8192 --regime graph-cold --budget 0.2 --json $OUT/fused-tc-r8192.json > $OUT/fused-tc-r8192.log 2>&1; echo "fused R=8192 rc=$?"
for R in 8192 2048; do
  timeout 120 python3 scripts/device/inductor_forced.py $R bench rmsnorm --impl ridgeline --impl torch-compile --shapes 16384x8192,4096x7168 --regime graph-cold --budget 0.2 --json $OUT/plain-tc-r$R.json > $OUT/plain-tc-r$R.log 2>&1; echo "plain R=$R rc=$?"
done
timeout 120 python3 scripts/explore_rmsnorm.py $OUT/explore-fused-small-shared-2pass.json --shapes fused-small --const-n --two-pass --fused --shared-out --budget 0.05 2>&1 | tail -4
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob(os.environ["OUT"] + "/*-tc-r*.json")):
    d = json.load(open(f))
    for m in d["measurements"]:
        print(os.path.basename(f), m["impl"], "x".join(map(str, m["shape"])), round(m["median_us"], 2))
PY
echo done
