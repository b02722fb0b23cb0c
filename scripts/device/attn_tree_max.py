"""The attention forward's row maximum and row sum as trees (kernel_ws.py `_row_max`, `_row_sum`, s35) against the
one in-thread chain `gl.max` / `gl.sum` make: the public forward (the rules' Gluon kernel and schedule at each
shape) with the shipped kernel ("tree"), a copy with the sum back to `gl.sum` ("tree-max") and one with both back
("flat"), each loaded from a temporary file. The maximum is exact in any order, so "tree-max" and "flat" must give
the same bits; "tree" sums in another order (its largest difference to "flat" is recorded) and is checked against
float64 at the smaller shapes. Interleaved graph timings, SDPA's cuDNN backend beside. Prints a table last; writes
JSON as it goes.

  python3 scripts/device/attn_tree_max.py --json OUT.json [--budget-s 0.2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import ridgeline.ops.attention.kernel_ws as shipped  # noqa: E402
from ridgeline.harness.timing import time_graph  # noqa: E402
from ridgeline.ops.attention.launch import attention  # noqa: E402
from ridgeline.ops.attention.spec import reference_attention  # noqa: E402

SHAPES = [  # (B, S, H, H_kv, D, causal): the D = 128 cells below cuDNN in s29 first
    (4, 4096, 32, 8, 128, False), (4, 4096, 32, 8, 128, True), (8, 2048, 32, 8, 128, False),
    (8, 2048, 32, 8, 128, True), (16, 1024, 32, 32, 128, True), (4, 4096, 32, 32, 128, False),
    (4, 4096, 32, 32, 128, True), (2, 8192, 32, 32, 128, True), (4, 4096, 32, 32, 64, True),
    (4, 4096, 16, 16, 256, False),
]


MAX = ("m_new = gl.maximum(m_i, _row_max(sc) * qk_scale)", "m_new = gl.maximum(m_i, gl.max(sc, 1) * qk_scale)")
SUM = ("l_i * alpha + _row_sum(p)", "l_i * alpha + gl.sum(p, 1)")


def _variant(name: str, *swaps: tuple[str, str]):
    """kernel_ws.py with each (shipped, old) text swapped back, as its own module."""
    src = Path(shipped.__file__).read_text()
    for new, old in swaps:
        assert new in src, f"kernel_ws.py no longer has {new!r}: update this driver"
        src = src.replace(new, old)
    path = Path(tempfile.mkdtemp()) / f"kernel_ws_{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"kernel_ws_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def _kernel(mod):
    # launch_ws imports `_attn_fwd_ws` from the module at each call: swap it for the call's duration
    saved = shipped._attn_fwd_ws
    shipped._attn_fwd_ws = mod._attn_fwd_ws
    try:
        yield
    finally:
        shipped._attn_fwd_ws = saved


def _run(mod, q, k, v, causal):
    with _kernel(mod):
        return attention(q, k, v, causal=causal)


def _time_shape(variants, q, k, v, causal, flops, label, rounds, budget):
    """Interleaved graph timings of each variant and cuDNN at one shape, yielded as they finish."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    gqa = {"enable_gqa": True} if k.shape[2] != q.shape[2] else {}

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, **gqa)

    fns = {n: (lambda m=m: _run(m, q, k, v, causal)) for n, m in variants.items()} | {"sdpa-cudnn": cudnn}
    for rnd in range(rounds):
        for name, fn in fns.items():
            rec = {"shape": label, "case": name, "round": rnd}
            try:
                t = time_graph([fn], budget)
                rec.update(us=t.median_us, iqr_us=t.iqr_us, tflops=flops / t.median_us / 1e6)
            except Exception as e:
                rec["error"] = f"{type(e).__name__}: {e}"[:300]
            yield rec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.2)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    variants = {"tree": shipped, "tree-max": _variant("tree_max", SUM), "flat": _variant("flat", MAX, SUM)}
    rows, checks = [], []

    def save():
        args.json.write_text(json.dumps({"checks": checks, "rows": rows}, indent=1))

    for b, s, h, hkv, d, causal in SHAPES:
        label = f"B{b} S{s} H{h}/{hkv} D{d} {'causal' if causal else 'full'}"
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
        try:
            outs = {n: _run(m, q, k, v, causal) for n, m in variants.items()}
            chk = {"shape": label, "tree_max_same_bits": bool(torch.equal(outs["tree-max"], outs["flat"])),
                   "tree_diff_vs_flat": (outs["tree"].float() - outs["flat"].float()).abs().max().item()}
            if s <= 2048 and b <= 8:  # float64 at the smaller shapes (the reference's memory)
                ref = reference_attention({"q": q[:1], "k": k[:1], "v": v[:1], "causal": causal, "window": None,
                                           "cu_seqlens": None})[0]
                err = (outs["tree"][:1].double() - ref).abs()
                chk["ok_vs_float64"] = bool((err <= 2e-2 + 2e-2 * ref.abs()).all())
                chk["max_err"] = err.max().item()
        except Exception as e:
            chk = {"shape": label, "error": f"{type(e).__name__}: {e}"[:300]}
        checks.append(chk)
        print(json.dumps(chk), flush=True)
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        for rec in _time_shape(variants, q, k, v, causal, flops, label, args.rounds, args.budget_s):
            rows.append(rec)
            print(json.dumps(rec), flush=True)
            save()
        del q, k, v
        torch.cuda.empty_cache()
    save()
    print(f"\n{'shape':32} {'tree us':>9} {'treemax':>9} {'flat us':>9} {'cudnn us':>9} {'flat/tree':>9}")
    for b, s, h, hkv, d, causal in SHAPES:
        label = f"B{b} S{s} H{h}/{hkv} D{d} {'causal' if causal else 'full'}"
        best = {n: min((r["us"] for r in rows if r["shape"] == label and r["case"] == n and "us" in r),
                       default=float("nan")) for n in ("tree", "tree-max", "flat", "sdpa-cudnn")}
        print(f"{label:32} {best['tree']:9.1f} {best['tree-max']:9.1f} {best['flat']:9.1f} {best['sdpa-cudnn']:9.1f} "
              f"{best['flat'] / best['tree']:9.3f}")
    for c in checks:
        print(c)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
