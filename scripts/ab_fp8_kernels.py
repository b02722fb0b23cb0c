"""A/B in one process on the GPU: the standalone FP8 kernel of commit 2ac2bdf against the main kernel's QUANT
epilogue (and its weight-first / register-cap knobs), static, dynamic and fused dynamic, graph-cold.

The old kernel is not in the tree any more; extract it first (the GPU machine has no git):
    git show 2ac2bdf:src/ridgeline/kernels/rmsnorm_quant.py > scripts/_ab_old_fp8_kernel.py
then: python scripts/ab_fp8_kernels.py OUT.json   (record: docs/results/h200-ab-fp8.json, run as
scripts/_ab_fp8.py at commit cd07e99, where "new-nowf" still loaded the weight twice for dynamic scales)
"""
import dataclasses
import functools
import json
import sys

import torch

sys.path.insert(0, "scripts")
import _ab_old_fp8_kernel as old  # noqa: E402

from ridgeline.harness.timing import time_graph  # noqa: E402
from ridgeline.ops.rmsnorm.launch import _launch, config_for  # noqa: E402

out_path = sys.argv[1]
L2 = 60 * 2**20
res = []
shapes = [(1024, 4096), (4096, 4096), (16384, 4096), (65536, 4096), (1024, 8192), (4096, 8192), (16384, 8192),
          (4096, 4100)]
for m, n in shapes:
    for kind in ("static", "dynamic", "fused-dynamic"):
        fused = kind == "fused-dynamic"
        quant = 1 if kind == "static" else 2
        nbytes = m * n * (7 if fused else 3)
        count = max(1, min(512, -(-3 * L2 // nbytes)))
        sets = []
        for _ in range(count):
            x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
            r = torch.randn_like(x) if fused else None
            w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
            q = torch.empty(m, n, device="cuda", dtype=torch.float8_e4m3fn)
            s = torch.full((m,), 0.01, device="cuda") if quant == 2 else torch.full((1,), 0.01, device="cuda")
            ro = torch.empty_like(x) if fused else None
            sets.append((x, r, ro, w, q, s))
        base = config_for(n, torch.bfloat16, m, fused, quant=quant)
        variants = {"new": base}
        if base.single_pass:  # the names of the record (h200-ab-fp8.json, commit cd07e99): "new" was weight first
            variants = {name: dataclasses.replace(base, weight_first=wf, max_registers=regs)
                        for name, wf, regs in (("new", True, 0), ("new-regs32", True, 32), ("new-nowf", False, 0),
                                               ("new-nowf-regs32", False, 32))}
        calls = {}
        for name, cfg in variants.items():
            calls[name] = [functools.partial(_launch, x, n, r, n, ro, n, w, q, n, m, n, 1e-6, 0.0, cfg, quant, s)
                           for x, r, ro, w, q, s in sets]
        if n <= old.MAX_HIDDEN:
            calls["old"] = [functools.partial(old.launch_fp8, x, n, r, n, ro, w, q, s, m, n, 1e-6, 0.0, quant == 2)
                            for x, r, ro, w, q, s in sets]
        for name, cl in calls.items():
            try:
                cl[0]()
                torch.cuda.synchronize()
                t = time_graph(cl, 0.08, regime="graph-cold")
                res.append({"shape": [m, n], "kind": kind, "variant": name, "median_us": t.median_us,
                            "gbps": (nbytes + 2 * n) / t.median_us / 1e3})
            except Exception as e:
                res.append({"shape": [m, n], "kind": kind, "variant": name, "error": str(e)[:200]})
        del sets
        torch.cuda.empty_cache()
        json.dump(res, open(out_path, "w"), indent=1)
for m, n in shapes:
    for kind in ("static", "dynamic", "fused-dynamic"):
        rows = [r for r in res if r["shape"] == [m, n] and r["kind"] == kind]
        print(f"{m}x{n} {kind:14}", "  ".join(f"{r['variant']}:{r.get('median_us', float('nan')):.2f}" for r in rows))
