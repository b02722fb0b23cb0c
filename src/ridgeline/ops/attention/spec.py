"""Contracts of attention prefill and of its backward.

attention:      out = softmax(q k^T * scale + mask) v              fn(q, k, v, causal, window, cu_seqlens,
                                                                       max_seqlen) -> out
attention_bwd:  (dq, dk, dv) from q, k, v, out, dout, lse          fn(q, k, v, out, dout, lse, causal, window,
                                                                       cu_seqlens, max_seqlen) -> (dq, dk, dv)

The backward's inputs are what the standard (FlashAttention) autograd formulation saves: q, k, v, the forward's
output and its fp32 logsumexp [B, H, S_q] (natural log), plus the incoming gradient dout; every implementation
(ours, torch's flash and cuDNN backward entry points) is timed on the same work.

Shapes: (B, S, Hq, Hkv, D) self-attention; (B, Sq, Sk, Hq, Hkv, D) with S_q != S_k; (T, Hq, Hkv, D) a packed
batch of T tokens in sequences of the fixed lengths `varlen_lengths(T)` (an empty one and a length-1 one among
them) with cu_seqlens. Layout [B, S, H, D]; variant "bhsd" passes q/k/v as transposed views of [B, H, S, D]
storage. Masks: "causal" (bottom-right aligned), "window" (the last W keys, W = `window_for(S_k)`).
Dtypes bf16 and fp16 (the tensor-core path), D in {16 .. 256}.

Cost: FLOPs = 4 * H * D * (visible (query, key) pairs), counted exactly (non-causal: B * S_q * S_k; causal:
S(S+1)/2 per sequence, "halved"; window: the unmasked pairs). The backward counts the standard 2.5x (five
matmuls of the pair count against the forward's two; our two-kernel backward recomputes Q K^T and dP in the
dQ kernel, doing 7, i.e. 1.4x the counted work). Bytes: q, k, v, out (forward); q, k, v, out, dout, lse read and
dq, dk, dv written (backward). Held against the bf16/fp16 tensor-core rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

# B x S x Hq x Hkv x D (x causal) as the issue asks: ~10 cells, bf16.
SWEEP: list[Shape] = [(4, 4096, 32, 32, 128), (4, 4096, 32, 8, 128), (1, 16384, 32, 8, 128), (8, 2048, 32, 8, 128),
                      (4, 4096, 32, 32, 64), (4, 4096, 16, 16, 256), (16384, 32, 8, 128), (2, 2048, 8192, 32, 8, 128)]
SWEEP_CAUSAL = [(4, 4096, 32, 32, 128), (4, 4096, 32, 8, 128), (1, 16384, 32, 8, 128), (16384, 32, 8, 128)]
EDGE: list[Shape] = [(1, 1, 2, 1, 64), (2, 97, 4, 2, 64), (1, 1000, 2, 2, 128), (1, 97, 1000, 2, 1, 64),
                     (1, 1000, 97, 2, 2, 64), (3000, 4, 1, 128), (1, 300, 1, 1, 256), (0, 64, 2, 2, 64)]
CPU: list[Shape] = [(1, 1, 2, 1, 16), (2, 37, 4, 2, 32), (1, 23, 40, 2, 2, 16), (1, 40, 23, 2, 1, 16),
                    (50, 2, 1, 16), (1, 64, 1, 1, 64)]
VARIANTS = ("", "causal", "window", "bhsd", "causal+bhsd", "window+bhsd")
# The reference holds (rows x keys) float64 scores of this many heads x rows at once.
REF_BUDGET = 2**26
# Machine epsilon of the stored dtype (spacing of 1.0): P and dS are rounded to it before their products.
EPS = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def varlen_lengths(total: int) -> list[int]:
    """The packed case's sequence lengths: half, an eighth, empty, a quarter, one token and the rest."""
    lens = [total // 2, total // 8, 0, total // 4, min(1, total)]
    return [*lens, total - sum(lens)]


def window_for(seq_k: int) -> int:
    """W of the "window" variant: a quarter of the keys, 1024 at most (a Mistral-like band at long S)."""
    return max(1, min(1024, seq_k // 4))


def _dims(shape: Shape) -> tuple[int, int, int, int, int, int, bool]:
    """(B, S_q, S_k, Hq, Hkv, D, packed)."""
    if len(shape) == 4:
        return len(varlen_lengths(shape[0])), shape[0], shape[0], shape[1], shape[2], shape[3], True
    if len(shape) == 5:
        b, s, hq, hkv, d = shape
        return b, s, s, hq, hkv, d, False
    b, sq, sk, hq, hkv, d = shape
    return b, sq, sk, hq, hkv, d, False


def _window(variant: str, seq_k: int) -> int | None:
    return window_for(seq_k) if "window" in variant else None


def _bounds(variant: str, seq_k: int) -> tuple[int, int]:
    from ridgeline.ops.attention.launch import resolve_window

    return resolve_window("causal" in variant, _window(variant, seq_k))


def visible_pairs(seq_q: int, seq_k: int, left: int, right: int) -> int:
    """(query, key) pairs a bottom-right aligned mask lets through, counted exactly."""
    if seq_q == 0 or seq_k == 0:
        return 0
    pos = torch.arange(seq_q, dtype=torch.int64) + (seq_k - seq_q)
    lo = (pos - left).clamp(min=0) if left >= 0 else torch.zeros_like(pos)
    hi = (pos + right).clamp(max=seq_k - 1) if right >= 0 else torch.full_like(pos, seq_k - 1)
    return int((hi - lo + 1).clamp(min=0).sum())


def _sequences(shape: Shape) -> list[tuple[int, int]]:
    b, sq, sk, _hq, _hkv, _d, packed = _dims(shape)
    if packed:
        return [(n, n) for n in varlen_lengths(shape[0])]
    return [(sq, sk)] * b


def pairs_of(shape: Shape, variant: str) -> int:
    return sum(visible_pairs(sq, sk, *_bounds(variant, sk)) for sq, sk in _sequences(shape))


def _gen(device, seed: int) -> torch.Generator:
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


def _qkv(case: Case, device, gen: torch.Generator) -> dict[str, Any]:
    b, sq, sk, hq, hkv, d, packed = _dims(case.shape)
    window = _window(case.variant, sk)
    if packed:
        t = case.shape[0]
        sizes = ((t, hq, d), (t, hkv, d), (t, hkv, d))
    else:
        sizes = ((b, sq, hq, d), (b, sk, hkv, d), (b, sk, hkv, d))
    out = {}
    for name, size in zip("qkv", sizes, strict=True):
        if "bhsd" in case.variant and not packed:  # [B, H, S, D] storage, passed as its [B, S, H, D] view
            x = torch.randn((size[0], size[2], size[1], size[3]), generator=gen, device=device)
            out[name] = x.to(case.dtype).transpose(1, 2)
        else:
            out[name] = torch.randn(size, generator=gen, device=device).to(case.dtype)
    cu = None
    if packed:
        lens = varlen_lengths(case.shape[0])
        cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32, device=device)
    out.update(causal="causal" in case.variant, window=window, cu_seqlens=cu,
               max_seqlen=max(varlen_lengths(case.shape[0])) if packed else None)
    return out


def _pieces(inputs: Inputs):
    """(q, k, v views of one sequence [S, H, D], token slice) for each sequence of the batch."""
    q, cu = inputs["q"], inputs["cu_seqlens"]
    if cu is None:
        for b in range(q.shape[0]):
            yield b, slice(None), slice(None)
    else:
        c = cu.tolist()
        for i in range(len(c) - 1):
            yield None, slice(c[i], c[i + 1]), slice(c[i], c[i + 1])


def _sequence(t: torch.Tensor, b, sl: slice) -> torch.Tensor:
    return t[b] if b is not None else t[sl]


def reference_attention(inputs: Inputs, dout: torch.Tensor | None = None, scale: float | None = None):
    """float64 (out, lse) and, given dout, (dq, dk, dv): row chunks, every head, GQA by head index (no copies)."""
    from ridgeline.ops.attention.launch import resolve_window

    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    hq, hkv, d = q.shape[-2], k.shape[-2], q.shape[-1]
    g = hq // hkv
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    left, right = resolve_window(inputs["causal"], inputs["window"])
    out = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    lse_shape = (hq, q.shape[0]) if inputs["cu_seqlens"] is not None else (q.shape[0], hq, q.shape[1])
    lse = torch.full(lse_shape, float("-inf"), dtype=torch.float64, device=q.device)
    grads = [torch.zeros(t.shape, dtype=torch.float64, device=q.device) for t in (q, k, v)] if dout is not None \
        else None
    for b, qs, ks in _pieces(inputs):
        qq = _sequence(q, b, qs).double().permute(1, 0, 2)  # [H, S_q, D]
        kk = _sequence(k, b, ks).double().permute(1, 0, 2).repeat_interleave(g, 0)
        vv = _sequence(v, b, ks).double().permute(1, 0, 2).repeat_interleave(g, 0)
        sq, sk = qq.shape[1], kk.shape[1]
        if sq == 0:
            continue
        step = max(1, REF_BUDGET // max(1, hq * sk))
        dkk = torch.zeros_like(kk) if dout is not None else None
        dvv = torch.zeros_like(vv) if dout is not None else None
        for r0 in range(0, sq, step):
            rows = torch.arange(r0, min(sq, r0 + step), device=q.device)
            s = qq[:, rows] @ kk.transpose(1, 2) * scale
            pos = rows[:, None] + (sk - sq)
            cols = torch.arange(sk, device=q.device)[None, :]
            ok = torch.ones(len(rows), sk, dtype=torch.bool, device=q.device)
            if left >= 0:
                ok &= cols >= pos - left
            if right >= 0:
                ok &= cols <= pos + right
            s = s.masked_fill(~ok, float("-inf"))
            m = torch.logsumexp(s, -1)  # [H, rows]
            p = torch.nan_to_num(torch.exp(s - m[..., None]), nan=0.0)
            o = p @ vv
            o_tok = o.permute(1, 0, 2)
            if b is not None:
                out[b, r0:r0 + len(rows)] = o_tok
                lse[b, :, r0:r0 + len(rows)] = m
            else:
                out[qs.start + r0:qs.start + r0 + len(rows)] = o_tok
                lse[:, qs.start + r0:qs.start + r0 + len(rows)] = m
            if dout is not None:
                do = _sequence(dout, b, qs).double().permute(1, 0, 2)[:, rows]
                dp = do @ vv.transpose(1, 2)
                ds = p * (dp - (do * o).sum(-1, keepdim=True))
                dq = (ds @ kk * scale).permute(1, 0, 2)
                dkk += ds.transpose(1, 2) @ qq[:, rows] * scale
                dvv += p.transpose(1, 2) @ do
                if b is not None:
                    grads[0][b, r0:r0 + len(rows)] = dq
                else:
                    grads[0][qs.start + r0:qs.start + r0 + len(rows)] = dq
        if dout is not None:
            dk_seq = dkk.view(hkv, g, sk, d).sum(1).permute(1, 0, 2)
            dv_seq = dvv.view(hkv, g, sk, d).sum(1).permute(1, 0, 2)
            if b is not None:
                grads[1][b], grads[2][b] = dk_seq, dv_seq
            else:
                grads[1][ks], grads[2][ks] = dk_seq, dv_seq
    return out, lse, grads


class _AttentionFamily:
    def rows(self, shape: Shape) -> int:
        # Dense: sequences are rows (dim 0 of q, k, v); packed (rank 4): dim 0 is tokens, never sliced.
        return 1 if len(shape) == 4 else shape[0]

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        eps = EPS.get(dtype, 2.0**-8)
        if output == "lse":
            return Tolerance(atol=1e-4, rtol=1e-5)
        return Tolerance(atol=2 * eps, rtol=2 * eps) if output == "out" else Tolerance(atol=4 * eps, rtol=4 * eps)

    def tolerance_for(self, case: Case, output: str, dtype: torch.dtype) -> Tolerance:
        """out: a dtype rounding of P before P V (a weighted mean of rounded terms: no growth with S_k) plus the
        output's own rounding. dk, dv: sums over the S_q queries of P or dS rounded to the dtype, whose weights
        sum to ~S_q / S_k per key (~ln S for the first keys under a causal mask): the error grows like the square
        root of that sum. dq: as out, with dP of magnitude ~ |dout| |v| sqrt(D) times scale = 1/sqrt(D): no net
        growth with D."""
        tol = self.tolerance(dtype, output)
        if output in ("dk", "dv"):
            _b, sq, sk, *_ = _dims(case.shape)
            weight = sq / max(sk, 1)
            if "causal" in case.variant or "window" in case.variant:  # (a window's first keys alike, up to ln W)
                # The first key is seen by every query, with weight ~1/(i+1) from query i: its weights sum to the
                # harmonic number of S ~ ln S + 0.58, not 1 (the H200 measured dk 1.6x the non-causal bound at
                # S = 16384: 0.0247 against 0.0156).
                weight = max(weight, math.log(max(sk, 1)) + 0.58)
            grow = math.sqrt(max(1.0, weight))
            return Tolerance(atol=tol.atol * grow, rtol=tol.rtol * grow)
        return tol

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        shapes = self.shape_sets["edge"] if torch.device(device).type == "cuda" else self.shape_sets["cpu"]
        cases = [Case(s, dtype, v) for s in shapes for v in ("", "causal")]
        cases += [Case(s, dtype, "window") for s in shapes[1:4]]
        cases += [Case(s, dtype, "bhsd") for s in shapes[1:3] if len(s) != 4]
        return cases

    def auto_regime(self, case: Case) -> str:
        return "cold-eager"

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.ops.attention.rules import Case as RuleCase
        from ridgeline.ops.attention.rules import rule_for

        d = case.shape[-1]
        masked = "causal" in case.variant or "window" in case.variant
        kernels = ("dkdv", "dq") if self.name.endswith("_bwd") else ("fwd",)
        info = {k: rule_for(RuleCase(k, d, masked)).config.describe() for k in kernels}
        if "fwd" in info and _gluon_forward_takes(case, device):
            from ridgeline.ops.attention.rules import WS_FORWARD

            info["fwd"] = WS_FORWARD.describe(*gluon_schedule_args(case))
        return info


def gluon_schedule_args(case: Case) -> tuple[int, bool, int, int, bool]:
    """(D, causal, S_k, left, packed): what `WS_FORWARD.schedule` / `.describe` go by for this case. S_k is the
    longest sequence's keys of a packed case; causal is the kernel's (a window bounds the right side too)."""
    packed = _dims(case.shape)[-1]
    keys = max(varlen_lengths(case.shape[0])) if packed else _dims(case.shape)[2]
    left, right = _bounds(case.variant, keys)
    return case.shape[-1], right == 0, keys, left, packed


def _gluon_forward_takes(case: Case, device: Any, assume_sm90: bool = False) -> bool:
    """Whether the rules send this case's forward to the Gluon kernel on the inputs the harness makes (launch_ws's
    conditions; "bhsd" inputs are [B, H, S, D] tensors seen as [B, S, H, D] views, whose strides it refuses).
    `assume_sm90`: the profiler's question, what an sm_90 GPU would run."""
    from ridgeline.ops.attention.launch_ws import ws_device, ws_kind
    from ridgeline.ops.attention.rules import WS_FORWARD

    d, packed = case.shape[-1], _dims(case.shape)[-1]
    left = 0 if "window" in case.variant else -1
    if "bhsd" in case.variant or not WS_FORWARD.takes(d, packed, left):
        return False
    if not ws_kind(case.dtype, d, packed, left, -1):
        return False
    return assume_sm90 or (torch.cuda.is_available() and ws_device(torch.device(device)))


FIELDS: dict[str, Any] = {
    "dims": (), "ranks": (4, 5, 6), "dtypes": (torch.bfloat16, torch.float16), "variants": VARIANTS,
    "shape_sets": {"sweep": SWEEP, "edge": EDGE, "cpu": CPU},
}


def _bytes(shape: Shape, itemsize: int) -> tuple[int, int]:
    """(bytes of q or out, bytes of k or v) in the stored dtype."""
    b, sq, sk, hq, hkv, d, packed = _dims(shape)
    if packed:
        return shape[0] * hq * d * itemsize, shape[0] * hkv * d * itemsize
    return b * sq * hq * d * itemsize, b * sk * hkv * d * itemsize


class AttentionSpec(_AttentionFamily, OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="attention",
            summary="prefill attention: softmax(q k^T * scale + causal/window mask) v, GQA, packed batches",
            signature="fn(q, k, v, causal, window, cu_seqlens, max_seqlen) -> out",
            outputs=("out",),
            batch_inputs=("q", "k", "v"),
            **FIELDS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        return _qkv(case, device, _gen(device, seed))

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (reference_attention(inputs)[0],)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["q"], inputs["k"], inputs["v"], inputs["causal"], inputs["window"], inputs["cu_seqlens"],
                   inputs["max_seqlen"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        qb, kb = _bytes(shape, dtype.itemsize)
        _b, _sq, _sk, hq, _hkv, d, _p = _dims(shape)
        return Cost(bytes=2 * qb + 2 * kb, flops=4 * hq * d * pairs_of(shape, variant),
                    unit="bf16" if dtype == torch.bfloat16 else "fp16")


class AttentionBwdSpec(_AttentionFamily, OpSpec):
    """(dq, dk, dv) from the saved q, k, v, out, lse and the incoming dout (see the module doc)."""

    def __init__(self) -> None:
        super().__init__(
            name="attention_bwd",
            summary="prefill attention backward from the saved out and logsumexp: dq, dk, dv (GQA sums dk/dv)",
            signature="fn(q, k, v, out, dout, lse, causal, window, cu_seqlens, max_seqlen) -> (dq, dk, dv)",
            outputs=("dq", "dk", "dv"),
            batch_inputs=("q", "k", "v", "out", "dout", "lse"),
            **FIELDS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        gen = _gen(device, seed)
        inputs = _qkv(case, device, gen)
        out, lse, _ = reference_attention(inputs)
        # out and lse as a forward stores them: out rounded once to the dtype, lse in fp32.
        inputs["out"] = out.to(case.dtype)
        inputs["lse"] = lse.to(torch.float32)
        inputs["dout"] = torch.randn(out.shape, generator=gen, device=device).to(case.dtype)
        return inputs

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return tuple(reference_attention(inputs, inputs["dout"])[2])

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return tuple(fn(inputs["q"], inputs["k"], inputs["v"], inputs["out"], inputs["dout"], inputs["lse"],
                        inputs["causal"], inputs["window"], inputs["cu_seqlens"], inputs["max_seqlen"]))

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        qb, kb = _bytes(shape, dtype.itemsize)
        _b, _sq, _sk, hq, _hkv, d, _p = _dims(shape)
        lse_bytes = qb // (d * dtype.itemsize) * 4
        # read q, out, dout (3 qb), k, v (2 kb) and lse; write dq (qb), dk, dv (2 kb)
        return Cost(bytes=4 * qb + 4 * kb + lse_bytes,
                    flops=10 * hq * d * pairs_of(shape, variant), unit="bf16" if dtype == torch.bfloat16 else "fp16")


register_spec(AttentionSpec())
register_spec(AttentionBwdSpec())


def _ours_fwd() -> Callable[..., Any]:
    from ridgeline.ops.attention.launch import attention

    def fn(q, k, v, causal, window, cu_seqlens, max_seqlen):
        return attention(q, k, v, causal=causal, window=window, cu_seqlens=cu_seqlens, max_seqlen=max_seqlen)

    return fn


def _ours_bwd() -> Callable[..., Any]:
    from ridgeline.ops.attention.launch import attention_backward

    def fn(q, k, v, out, dout, lse, causal, window, cu_seqlens, max_seqlen):
        return attention_backward(q, k, v, out, dout, lse, causal=causal, window=window, cu_seqlens=cu_seqlens,
                                  max_seqlen=max_seqlen)

    return fn


register_impl("attention", "ridgeline", "ours", _ours_fwd, description="ridgeline Triton FlashAttention-style kernel")
register_impl("attention_bwd", "ridgeline", "ours", _ours_bwd,
              description="ridgeline Triton backward (dK/dV kernel + dQ kernel, deterministic)")
