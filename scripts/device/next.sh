# Prepared at the end of session 12 for a later GPU session (not run yet). Run as:
#   RIDGELINE_GIT_SHA=<sha> RIDGELINE_GIT_DIRTY=0 bash scripts/device/next.sh   (carry .whl)
# The leads session 12 left (docs/perf/rmsnorm.md, "Session 12"):
# (1) Rows of 7168 over 16 warps, weight first, capped at 32 registers (the 8192 block's config): the plain op gained
#     7% at 1024 rows and 2.5% at 4096 rows cold-eager, lost 3-10% at 128 rows (h200-explore-s12-w7k-16w-focus*.json).
#     A warp count changes both ops' bits, so the fused op must be measured too: here, both ops, graph-cold, graph-hot
#     decode rows and cold-eager.
# (2) torch.compile's lead after a flush at 7168-8192 columns (Nsight Compute: 89% achieved occupancy against our 45%
#     at 4096x7168): the SASS of inductor's kernel beside ours (`ridgeline profile` writes both under --out).
# ~4 minutes of device time.
source scripts/device/setup.sh
set -o pipefail
E="python3 scripts/explore_rmsnorm.py"
timeout 70 $E $OUT/w7k-focus-fused.json --shapes w7k-16w --focus --warps 16 --fused --shared-out --budget 0.1 2>&1 | tail -1
timeout 70 $E $OUT/w7k-focus-fused-eager.json --shapes w7k-16w --focus --warps 16 --fused --regime cold-eager --budget 0.1 2>&1 | tail -1
timeout 50 $E $OUT/w7k-focus-decode-hot.json --shapes w7k-rows --focus --warps 16 --shared-out --regime graph-hot --budget 0.05 2>&1 | tail -1
# (ours: `ridgeline profile` writes its SASS under --out; inductor compiles outside triton.jit, so its cubins are taken
# from inductor's cache and disassembled with cuobjdump)
timeout 110 ridgeline profile rmsnorm --impl ridgeline --shape 4096x7168 --no-kineto --out /tmp/prof_ours > /dev/null 2>&1
tar czf $OUT/prof_ours.tgz -C /tmp prof_ours; echo "ours rc=$?"
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
timeout 110 ridgeline bench rmsnorm --impl torch-compile --shapes 4096x7168 --regime graph-cold --budget 0.05 > /dev/null 2>&1
for c in $(find /tmp/inductor-cache -name "*.cubin" | head -4); do cuobjdump -sass $c; done > $OUT/inductor_sass.txt
find /tmp/inductor-cache -name "*.py" -path "*triton*" | head -4 | xargs cat > $OUT/inductor_kernels.py; echo "inductor rc=$?"
echo done
