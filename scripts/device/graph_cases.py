"""One shape's candidate calls timed the way the s23 drivers (fp8_m1.py, matmul_mid.py) time them: each case is a
list of calls over weight copies (so every call reads its weight from DRAM), timed by ridgeline's CUDA-graph timing;
its first output compared bitwise with the rule's; a case that fails is recorded with its error, not raised."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ridgeline.harness.timing import time_graph


def time_cases(label: str, cases: dict[str, list[Callable[[], torch.Tensor]]], ref: torch.Tensor, budget_s: float,
               same_bits: Callable[[torch.Tensor, torch.Tensor], bool] | None,
               rates: Callable[[float], dict[str, float]], peers: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Records of every case of one shape, printed as they finish; `peers` are not compared bitwise."""
    rows = []
    for name, fns in cases.items():
        rec: dict[str, Any] = {"shape": label, "case": name}
        try:
            y = fns[0]()
            if same_bits is not None and name not in peers:
                rec["same_bits"] = bool(same_bits(y, ref))
            t = time_graph(fns, budget_s)
            rec.update(us=t.median_us, iqr_us=t.iqr_us, **rates(t.median_us))
        except Exception as e:  # a config that does not compile or fit is a result, not a crash
            rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        rows.append(rec)
        print(json.dumps(rec), flush=True)
    return rows


def run_shapes(shapes: list[tuple[int, int, int]], make_cases: Callable[[int, int, int], tuple[dict, torch.Tensor]],
               json_path: Path, budget_s: float, same_bits: Callable[[torch.Tensor, torch.Tensor], bool],
               rates: Callable[[int, int, int, float], dict[str, float]], peers: tuple[str, ...]) -> list[dict]:
    """Every shape's cases (written to `json_path` after each shape, so a cut run keeps what finished), then a table
    of time, the first rate and whether the bits match the rule's."""
    rows: list[dict[str, Any]] = []
    for m, n, k in shapes:
        cases, ref = make_cases(m, n, k)
        rows += time_cases(f"{m}x{n}x{k}", cases, ref, budget_s, same_bits,
                           lambda us, m=m, n=n, k=k: rates(m, n, k, us), peers)
        json_path.write_text(json.dumps(rows, indent=1))
        del cases
        torch.cuda.empty_cache()
    rate = next((key for r in rows for key in r if key.endswith(("gbps", "tflops"))), "rate")
    print(f"\n{'shape':16} {'case':52} {'us':>8} {rate:>7} same bits")
    for r in rows:
        print(f"{r['shape']:16} {r['case'][:52]:52} {r.get('us', float('nan')):8.2f} {r.get(rate, 0):7.1f} "
              f"{r.get('same_bits', '')!s:5} {r.get('error', '')[:60]}")
    return rows
