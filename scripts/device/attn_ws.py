"""The warp-specialized attention forward (ops/attention/kernel_ws.py, Gluon) beside the rule's Triton forward and
SDPA's cuDNN and flash backends: first against a float64 reference at shapes that cut its tiles (S not a multiple
of 128, S_q != S_k both ways, GQA, D = 64, fp16, rows that see no key), then graph-timed at the issue's shapes.
Prints a table last and writes every check and timing to JSON as it goes.

  python3 scripts/device/attn_ws.py --json OUT.json [--budget-s 0.3]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from ridgeline.harness.timing import time_graph  # noqa: E402
from ridgeline.ops.attention.launch import _forward, _prepare, attention  # noqa: E402
from ridgeline.ops.attention.launch_ws import launch_ws, ws_supported  # noqa: E402
from ridgeline.ops.attention.rules import config_for  # noqa: E402
from ridgeline.ops.attention.spec import reference_attention  # noqa: E402


def triton_forward(q, k, v, causal):
    """The Triton forward at its rule's tile (an explicit config bypasses the Gluon dispatch)."""
    args = _prepare(q, k, v, causal, None, None, None, None)
    return _forward(*args, store_lse=False, cfg=config_for("fwd", q.shape[-1], causal, False))[0]

CHECKS = [  # (B, S_q, S_k, H, H_kv, D, causal, dtype)
    (2, 1000, 1000, 4, 4, 128, True, torch.bfloat16), (2, 1000, 1000, 4, 4, 128, False, torch.bfloat16),
    (1, 300, 1000, 4, 2, 128, True, torch.bfloat16), (1, 1000, 300, 4, 1, 128, True, torch.bfloat16),
    (3, 257, 129, 8, 2, 64, False, torch.bfloat16), (2, 640, 640, 4, 4, 64, True, torch.float16),
    (1, 1, 77, 2, 2, 128, False, torch.bfloat16), (2, 128, 128, 2, 2, 128, True, torch.bfloat16),
    (2, 1000, 1000, 4, 4, 128, True, torch.bfloat16, 3), (3, 257, 129, 8, 2, 64, False, torch.bfloat16, 3),
    (2, 1000, 1000, 4, 2, 128, False, torch.bfloat16, 2, True),
    (2, 1000, 1000, 4, 4, 128, True, torch.bfloat16, 2, False, True),
    (1, 300, 1000, 4, 2, 128, True, torch.bfloat16, 2, False, True),
    (1, 1000, 300, 4, 1, 128, True, torch.bfloat16, 2, False, True),
    (3, 257, 129, 8, 2, 64, False, torch.bfloat16, 3, False, True),
    (2, 1000, 1000, 4, 2, 128, False, torch.bfloat16, 2, True, True),
    (2, 1000, 1000, 4, 4, 128, True, torch.bfloat16, 2, False, True, True),
    (1, 300, 1000, 4, 2, 128, True, torch.bfloat16, 2, False, True, True),
    (3, 257, 129, 8, 2, 64, False, torch.bfloat16, 3, False, False, True),
    (2, 1000, 1000, 4, 2, 256, True, torch.bfloat16), (1, 300, 1000, 4, 4, 256, False, torch.bfloat16),
    (2, 1000, 1000, 4, 2, 256, False, torch.bfloat16, 2, True),
    (2, 1000, 1000, 4, 2, 128, False, torch.bfloat16, 2, True, True, True),
    # programs of several query tiles (s29): causal pairs, persistent programs (few, so each walks many items)
    (2, 1000, 1000, 4, 2, 128, True, torch.bfloat16, 2, False, True, False, {"pairs": True}),
    (1, 300, 1000, 4, 2, 128, True, torch.bfloat16, 2, False, True, False, {"pairs": True, "persistent": True,
                                                                             "programs": 5}),
    (2, 1000, 1000, 4, 2, 128, False, torch.bfloat16, 2, True, True, False, {"persistent": True, "programs": 7}),
    (3, 257, 129, 8, 2, 64, True, torch.bfloat16, 2, False, False, False, {"pairs": True, "persistent": True}),
    (2, 1000, 1000, 4, 2, 256, True, torch.bfloat16, 2, False, False, False, {"pairs": True, "persistent": True,
                                                                              "programs": 3}),
]
SHAPES = [  # (B, S, H, H_kv, D, causal)
    (4, 4096, 32, 32, 128, False), (4, 4096, 32, 32, 128, True), (2, 8192, 32, 32, 128, True),
    (4, 4096, 32, 8, 128, True), (4, 4096, 32, 32, 64, True), (16, 1024, 32, 32, 128, True),
    (4, 4096, 16, 16, 256, True), (4, 4096, 16, 16, 256, False), (4, 4096, 32, 8, 128, False),
    (8, 2048, 32, 8, 128, False), (8, 2048, 32, 8, 128, True), (16, 1024, 32, 32, 128, False),
]


def _ws(q, k, v, causal, stages=2, lse=True, overlap=False, regs=(232, 40), pingpong=False, **schedule):
    out = torch.empty_like(q)
    lse_t = torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)
    launch_ws(q, k, v, out, lse_t, 1.0 / math.sqrt(q.shape[-1]), causal, lse, stages, overlap, regs, pingpong,
              **schedule)
    return out, lse_t


def _reference(q, k, v, causal):
    """float64 (out, lse) of the contract's reference (bottom-right causal, GQA; a row with no key: 0 / -inf)."""
    res = reference_attention({"q": q, "k": k, "v": v, "causal": causal, "window": None, "cu_seqlens": None})
    return res[0], res[1]


def _check(b, sq, sk, h, hkv, d, causal, dtype, stages=2, inf_next=False, overlap=False, pingpong=False,
           schedule=None) -> dict:
    schedule = schedule or {}
    g = torch.Generator(device="cuda").manual_seed(sq * 7 + sk)
    q, k, v = (torch.randn(b, s, n, d, device="cuda", generator=g).to(dtype) for s, n in ((sq, h), (sk, hkv),
                                                                                         (sk, hkv)))
    rec = {"case": f"B{b} Sq{sq} Sk{sk} H{h}/{hkv} D{d} {'causal' if causal else 'full'} {str(dtype)[6:]} "
                   f"s{stages}{' overlap' if overlap else ''}{' pingpong' if pingpong else ''}"
                   f"{' inf in the next sequence' if inf_next else ''}{' ' + str(schedule) if schedule else ''}"}
    rec["supported"] = ws_supported(q, k, v, False, -1, 0 if causal else -1)
    if inf_next:  # the first keys of sequence 1: a tile of sequence 0 must not read them
        k[1, :5] = float("inf")
        v[1, :5] = float("inf")
    out, lse = _ws(q, k, v, causal, stages, overlap=overlap, pingpong=pingpong, **schedule)
    if overlap or pingpong or schedule:  # the same arithmetic issued earlier: the same bits as the plain loop
        plain = _ws(q, k, v, causal, stages)
        # bits, so that NaN (sequence 1 of the inf case: inf - inf) equals NaN
        rec["overlap_equals_plain"] = bool(torch.equal(out.view(torch.int16), plain[0].view(torch.int16))
                                           and torch.equal(lse.view(torch.int32), plain[1].view(torch.int32)))
    if inf_next:  # judge sequence 0 only
        q, k, v, out, lse = q[:1], k[:1], v[:1], out[:1], lse[:1]
    ref, ref_lse = _reference(q, k, v, causal)
    rule = triton_forward(q, k, v, causal)
    public = attention(q, k, v, causal=causal)  # the dispatch: the Gluon forward where it applies
    rec["public_equals_ws"] = bool(torch.equal(public, out)) if not inf_next else None
    err = (out.double() - ref).abs()
    bound = 2e-2 + 2e-2 * ref.abs()
    lse_ok = torch.equal(torch.isinf(lse), torch.isinf(ref_lse)) and bool(
        ((lse.double() - ref_lse).abs()[~torch.isinf(ref_lse)] <= 1e-3).all())
    rec.update(max_err=err.max().item(), rule_max_err=(rule.double() - ref).abs().max().item(),
               finite=bool(torch.isfinite(out).all()), lse_ok=lse_ok, ok=bool((err <= bound).all()) and lse_ok)
    return rec


def _cases(q, k, v, causal) -> dict:
    """The candidates at one shape: the rule's Triton forward, the Gluon one (plain, overlapped, and in programs of
    several query tiles: causal pairs, persistent), SDPA's cuDNN and flash backends (on [B, H, S, D] views of the
    same tensors)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    gqa = {"enable_gqa": True} if k.shape[2] != q.shape[2] else {}

    def sdpa(backend):
        def run():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal, **gqa)
        return run

    d = q.shape[-1]
    ov = d == 128  # the overlapped loop where the rules take it
    cases = {"rule (triton)": lambda: triton_forward(q, k, v, causal),
             "ws s2": lambda: _ws(q, k, v, causal, 2, False)[0],
             "ws s2 overlap": lambda: _ws(q, k, v, causal, 2, False, True)[0],
             # s29: programs of several query tiles
             "ws persistent": lambda: _ws(q, k, v, causal, 2, False, ov, persistent=True)[0]}
    if causal:
        cases["ws pairs"] = lambda: _ws(q, k, v, causal, 2, False, ov, pairs=True)[0]
        cases["ws pairs persistent"] = lambda: _ws(q, k, v, causal, 2, False, ov, pairs=True, persistent=True)[0]
    if d == 128:
        cases["ws plain persistent"] = lambda: _ws(q, k, v, causal, 2, False, False, pairs=causal,
                                                   persistent=True)[0]
    cases["sdpa-cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    cases["sdpa-flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
    return cases


def _time(label, fns, budget, flops) -> dict:
    rec = {"shape": label[0], "case": label[1]}
    try:
        fns[0]()
        t = time_graph(fns, budget)
        rec.update(us=t.median_us, iqr_us=t.iqr_us, tflops=flops / t.median_us / 1e6)
    except Exception as e:
        rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    print(json.dumps(rec), flush=True)
    return rec


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=0.3)
    args = ap.parse_args()
    checks, rows = [], []
    for c in CHECKS:
        try:
            checks.append(_check(*c))
        except Exception as e:
            checks.append({"case": str(c), "error": f"{type(e).__name__}: {e}"[:400]})
        print(json.dumps(checks[-1]), flush=True)
        args.json.write_text(json.dumps({"checks": checks, "rows": rows}, indent=1))
    for b, s, h, hkv, d, causal in SHAPES:
        q = torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(b, s, hkv, d, device="cuda", dtype=torch.bfloat16)
        flops = 4 * b * h * s * s * d / (2 if causal else 1)
        label = f"B{b} S{s} H{h}/{hkv} D{d} {'causal' if causal else 'full'}"
        cases = _cases(q, k, v, causal)
        ref = cases["rule (triton)"]()
        for name, fn in cases.items():
            rec = _time((label, name), [fn], args.budget_s, flops)
            if name.startswith("ws") and "error" not in rec:
                rec["max_diff_vs_rule"] = (fn().float() - ref.float()).abs().max().item()
            rows.append(rec)
            args.json.write_text(json.dumps({"checks": checks, "rows": rows}, indent=1))
        del q, k, v
        torch.cuda.empty_cache()
    print(f"\n{'shape':34} {'case':20} {'us':>9} {'TFLOP/s':>8}")
    for r in rows:
        print(f"{r['shape']:34} {r['case']:20} {r.get('us', float('nan')):9.1f} {r.get('tflops', 0):8.1f} "
              f"{r.get('error', '')[:50]}{r.get('max_diff_vs_rule', '')}")
    for c in checks:
        print(c)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
