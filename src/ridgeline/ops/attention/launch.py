"""Host side of the attention prefill kernels: the public `attention(...)` and `attention_backward(...)`, their
argument checks, the launches, and the torch custom ops (autograd and torch.compile).

Layouts: dense q [B, S_q, H, D], k/v [B, S_k, H_kv, D]; packed q [total_q, H, D], k/v [total_k, H_kv, D] with
cu_seqlens. Any strides with a contiguous last dim are read in place, so [B, H, S, D] storage passes as its
transposed view `x.transpose(1, 2)` without a copy (a last dim with stride != 1 is copied: said where it is).
Outputs are fresh: out contiguous [B, S_q, H, D] (or [total_q, H, D]); lse fp32 [B, H, S_q] (or [H, total_q]),
natural log, -inf for a row that sees no key.
"""

from __future__ import annotations

import contextlib
import math

import torch

from ridgeline.lib.launch import (
    ensure_tma_allocator,
    interpreter_enabled,
    require_runnable_device,
    require_same_device,
    require_tensor,
)
from ridgeline.ops.attention.kernel import _attn_bwd_delta, _attn_bwd_dkdv, _attn_bwd_dq, _attn_fwd
from ridgeline.ops.attention.launch_ws import launch_ws, ws_supported
from ridgeline.ops.attention.rules import DELTA_BLOCK_M, DELTA_WARPS, WS_FORWARD, AttnConfig, config_for

DTYPES = (torch.float16, torch.bfloat16)
HEAD_DIMS = (16, 32, 64, 128, 256)
LOG2E = 1.4426950408889634
# Read once: Triton decided at import whether it interprets (tiles go to fp32 before tl.dot there).
_INTERPRETED = interpreter_enabled()
Window = tuple[int, int]


def _dtype_name(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def resolve_window(causal: bool, window: int | tuple[int, int] | None) -> Window:
    """(left, right) keys visible around a query's aligned position; -1 = unbounded on that side.

    window=None: unbounded; an int w: the last w keys up to and including the aligned position, (w - 1, 0) —
    the Mistral / Hugging Face `sliding_window` convention, which is causal by itself; a pair (left, right) as
    flash-attn's window_size. causal=True bounds the right side at 0 (bottom-right aligned when S_q != S_k).
    """
    if not isinstance(causal, bool):
        raise TypeError(f"causal: expected a bool, got {type(causal).__name__}")
    if window is None:
        left, right = -1, -1
    elif isinstance(window, int) and not isinstance(window, bool):
        if window < 1:
            raise ValueError(f"window: expected an int >= 1 (keys a query sees, itself included), got {window}")
        left, right = window - 1, 0
    elif isinstance(window, (tuple, list)) and len(window) == 2 and all(
            isinstance(w, int) and not isinstance(w, bool) for w in window):
        left, right = int(window[0]), int(window[1])
        if left < -1 or right < -1:
            raise ValueError(f"window: expected (left, right) ints >= -1 (-1 = unbounded), got {tuple(window)}")
    else:
        raise TypeError(f"window: expected None, an int or a (left, right) pair of ints, got {window!r}")
    if causal:
        right = 0 if right < 0 else min(right, 0)
    return left, right


def _check_qkv(q: object, k: object, v: object, varlen: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    rank = 3 if varlen else 4
    what = "[total, H, D] (packed, with cu_seqlens)" if varlen else "[B, S, H, D]"
    out = []
    for name, t in (("q", q), ("k", k), ("v", v)):
        t = require_tensor(name, t)
        if t.dtype not in DTYPES:
            raise TypeError(f"{name}: expected dtype float16 or bfloat16, got {_dtype_name(t.dtype)}")
        if t.dim() != rank:
            raise ValueError(f"{name}: expected {rank} dims {what}, got shape {tuple(t.shape)}")
        if t.stride(-1) != 1 and t.shape[-1] > 1:
            t = t.contiguous()  # (an exotic layout: the head dim must be contiguous for the tiles; one copy)
        out.append(t)
    q, k, v = out
    require_runnable_device("q", q)
    for name, t in (("k", k), ("v", v)):
        require_same_device(name, t, "q", q)
        if t.dtype != q.dtype:
            raise TypeError(f"{name}: expected dtype {_dtype_name(q.dtype)} (same as q), got {_dtype_name(t.dtype)}")
    if v.shape != k.shape:
        raise ValueError(f"v: expected shape {tuple(k.shape)} (same as k), got {tuple(v.shape)}")
    d = q.shape[-1]
    if d not in HEAD_DIMS:
        raise ValueError(f"q: expected a head dim in {HEAD_DIMS}, got {d}")
    if k.shape[-1] != d:
        raise ValueError(f"k: expected head dim {d} (same as q), got {k.shape[-1]}")
    hq, hkv = q.shape[-2], k.shape[-2]
    if hkv == 0 or hq % hkv:
        raise ValueError(f"k: expected a head count that divides q's {hq} (GQA/MQA), got {hkv}")
    if not varlen and k.shape[0] != q.shape[0]:
        raise ValueError(f"k: expected batch {q.shape[0]} (same as q), got {k.shape[0]}")
    return q, k, v


def _check_cu(cu_seqlens: object, max_seqlen: object, q: torch.Tensor, k: torch.Tensor):
    """(cu_q, cu_k, max_q, max_k) from one cu_seqlens tensor (shared by q and k) or a pair."""
    pair = cu_seqlens if isinstance(cu_seqlens, (tuple, list)) else (cu_seqlens, cu_seqlens)
    if len(pair) != 2:
        raise ValueError(f"cu_seqlens: expected a tensor or a (cu_seqlens_q, cu_seqlens_k) pair, got {len(pair)}")
    cus = []
    for name, cu in zip(("cu_seqlens", "cu_seqlens_k"), pair, strict=True):
        cu = require_tensor(name, cu)
        if cu.dtype != torch.int32:
            raise TypeError(f"{name}: expected dtype int32, got {_dtype_name(cu.dtype)}")
        if cu.dim() != 1 or cu.shape[0] < 1:
            raise ValueError(f"{name}: expected a 1-dim [B + 1] tensor, got shape {tuple(cu.shape)}")
        require_same_device(name, cu, "q", q)
        cus.append(cu if cu.is_contiguous() else cu.contiguous())
    if cus[0].shape != cus[1].shape:
        raise ValueError(f"cu_seqlens_k: expected shape {tuple(cus[0].shape)} (same batch as q's), "
                         f"got {tuple(cus[1].shape)}")
    given = None
    if max_seqlen is not None:
        given = list(max_seqlen) if isinstance(max_seqlen, (tuple, list)) else [max_seqlen, max_seqlen]
        if len(given) != 2 or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in given):
            raise ValueError(f"max_seqlen: expected an int >= 0 or a (max_q, max_k) pair, got {max_seqlen!r}")
    if given is not None and q.is_cuda:
        return cus[0], cus[1], given[0], given[1]  # trusted as given: checking the offsets would sync the host
    # The offsets are read here anyway (max_seqlen omitted: one host sync; on the CPU: free), so check them: a bad
    # offset would read past the packed tensors, a too-small max_seqlen would silently drop rows.
    lens = []
    for i, (name, cu, t) in enumerate(zip(("cu_seqlens", "cu_seqlens_k"), cus, (q, k), strict=True)):
        c = cu.tolist()
        steps = [b - a for a, b in zip(c, c[1:])]
        if c[0] < 0 or min(steps, default=0) < 0 or c[-1] > t.shape[0]:
            shown = str(c) if len(c) <= 8 else f"[{c[0]}, ..., {c[-1]}]"
            raise ValueError(f"{name}: expected non-decreasing offsets in [0, {t.shape[0]}] (the packed tokens), "
                             f"got {shown}")
        longest = max(steps, default=0)
        if given is not None and longest > given[i]:
            raise ValueError(f"max_seqlen: expected at least the longest sequence, {longest}, got {given[i]}")
        lens.append(longest if given is None else given[i])
    return cus[0], cus[1], lens[0], lens[1]


def _scale(scale: object, d: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale: expected a finite float > 0 or None (1/sqrt(D)), got {scale!r}")
    if not 1e-30 <= scale <= 1e30:  # (the kernels hold scale * log2(e) in fp32; a zero there turns -inf into NaN)
        raise ValueError(f"scale: expected a value in [1e-30, 1e30] (fp32 holds it), got {scale!r}")
    return float(scale)


def _strides3(t: torch.Tensor, varlen: bool) -> tuple[int, int, int]:
    """(batch, token, head) strides; packed tensors have no batch stride (sequences start at cu[b] tokens)."""
    if varlen:
        return 0, t.stride(0), t.stride(1)
    return t.stride(0), t.stride(1), t.stride(2)


def _geometry(q, k, cu_q, max_q, max_k):
    varlen = cu_q is not None
    batch = cu_q.shape[0] - 1 if varlen else q.shape[0]
    seq_q = max_q if varlen else q.shape[1]
    seq_k = max_k if varlen else k.shape[1]
    return varlen, batch, seq_q, seq_k


def _new_lse(q: torch.Tensor, varlen: bool) -> torch.Tensor:
    if varlen:
        return torch.empty((q.shape[1], q.shape[0]), dtype=torch.float32, device=q.device)
    return torch.empty((q.shape[0], q.shape[2], q.shape[1]), dtype=torch.float32, device=q.device)


def _lse_strides(lse: torch.Tensor, varlen: bool) -> tuple[int, int]:
    return (0, lse.stride(0)) if varlen else (lse.stride(0), lse.stride(1))


def _dummy(t: torch.Tensor) -> torch.Tensor:
    return t  # any tensor stands in for an unused pointer argument (VARLEN=False never reads it)


def _forward(q, k, v, cu_q, cu_k, max_q: int, max_k: int, scale: float, left: int, right: int,
             store_lse: bool = True, cfg: AttnConfig | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    varlen, batch, seq_q, seq_k = _geometry(q, k, cu_q, max_q, max_k)
    h, d = q.shape[-2], q.shape[-1]
    # Packed tokens outside every sequence (past cu[-1]) are never written: zeros, not garbage.
    out = torch.zeros(q.shape, dtype=q.dtype, device=q.device) if varlen else torch.empty(
        q.shape, dtype=q.dtype, device=q.device)
    lse = _new_lse(q, varlen)
    if batch == 0 or seq_q == 0 or h == 0:
        return out, lse
    if varlen and store_lse:
        lse.fill_(float("-inf"))  # (packed rows of no sequence; the kernel writes every row it owns)
    if cfg is None and WS_FORWARD.takes(d, varlen, left) and ws_supported(q, k, v, varlen, left, right):
        sch = WS_FORWARD.schedule(d, right == 0, seq_k, left, varlen)
        launch_ws(q, k, v, out, lse, scale, right == 0, store_lse, WS_FORWARD.stages, sch.overlap,
                  pingpong=WS_FORWARD.pingpong, pairs=sch.pairs, persistent=sch.persistent,
                  cu_q=cu_q, cu_k=cu_k, max_q=seq_q, max_k=seq_k, left=left)
        return out, lse
    if cfg is None:
        cfg = config_for("fwd", d, left >= 0 or right >= 0, _INTERPRETED)
    grid = (triton_cdiv(seq_q, cfg.block_m), batch * h)
    tma = _tma_ready(cfg, k, v, varlen)
    with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
        _attn_fwd[grid](
            q, k, v, out, lse, cu_q if varlen else _dummy(lse), cu_k if varlen else _dummy(lse),
            *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(out, varlen),
            *_lse_strides(lse, varlen), seq_q, seq_k, h, h // k.shape[-2], scale * LOG2E, left, right,
            VARLEN=varlen, HAS_LEFT=left >= 0, HAS_RIGHT=right >= 0, STORE_LSE=store_lse, HEAD_D=d,
            BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, UPCAST=_INTERPRETED, TMA=tma, FOLD=cfg.fold,
            num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return out, lse


def tma_readable(t: torch.Tensor, varlen: bool) -> bool:
    """Whether a tensor a kernel streams (K, V; the backward's Q and dO) can be read through tensor descriptors:
    every tile base (sequence, token and head offsets) 16-byte aligned, i.e. the pointer and the batch, token and
    head strides in bytes multiples of 16, and rows that do not overlap."""
    size = t.element_size()
    strides = _strides3(t, varlen)
    # (a token stride below D would make rows overlap: an expanded gradient, say; such tensors take pointer loads)
    return (t.data_ptr() % 16 == 0 and all((s * size) % 16 == 0 for s in strides) and t.stride(-1) == 1
            and strides[1] >= t.shape[-1])


def _tma_ready(cfg: AttnConfig, a: torch.Tensor, b: torch.Tensor, varlen: bool) -> bool:
    """Whether a kernel streams a and b through tensor descriptors: its config asks and both are readable so (on a
    GPU, Triton's allocator for the descriptors' scratch is then set)."""
    tma = cfg.tma and tma_readable(a, varlen) and tma_readable(b, varlen)
    if tma and a.is_cuda:
        ensure_tma_allocator()
    return tma


def _backward(q, k, v, out, dout, lse, dlse, cu_q, cu_k, max_q: int, max_k: int, scale: float, left: int,
              right: int, cfgs: tuple[AttnConfig, AttnConfig] | None = None):
    varlen, batch, seq_q, seq_k = _geometry(q, k, cu_q, max_q, max_k)
    h, hkv, d = q.shape[-2], k.shape[-2], q.shape[-1]
    dq = torch.zeros(q.shape, dtype=q.dtype, device=q.device) if varlen else torch.empty(
        q.shape, dtype=q.dtype, device=q.device)
    # dK/dV rows of keys no query sees (S_q = 0, padding tokens of a packed batch) must read 0.
    zero_kv = varlen or seq_q == 0
    dk = torch.zeros(k.shape, dtype=k.dtype, device=k.device) if zero_kv else torch.empty(
        k.shape, dtype=k.dtype, device=k.device)
    dv = torch.zeros(v.shape, dtype=v.dtype, device=v.device) if zero_kv else torch.empty(
        v.shape, dtype=v.dtype, device=v.device)
    if batch == 0 or h == 0 or (seq_q == 0 and seq_k == 0):
        return dq, dk, dv
    masked = left >= 0 or right >= 0
    up = _INTERPRETED
    cfg_kv, cfg_q = cfgs if cfgs is not None else (config_for("dkdv", d, masked, up), config_for("dq", d, masked, up))
    delta = torch.empty_like(lse)
    ls = _lse_strides(lse, varlen)
    cu_qa = cu_q if varlen else _dummy(lse)
    cu_ka = cu_k if varlen else _dummy(lse)
    flags = dict(VARLEN=varlen, HAS_LEFT=left >= 0, HAS_RIGHT=right >= 0, HEAD_D=d, UPCAST=up)
    tma_kv = _tma_ready(cfg_kv, q, dout, varlen)
    tma_q = _tma_ready(cfg_q, k, v, varlen)
    with torch.cuda.device(q.device) if q.is_cuda else contextlib.nullcontext():
        if seq_q:
            bm = DELTA_BLOCK_M[up]
            _attn_bwd_delta[(triton_cdiv(seq_q, bm), batch * h)](
                out, dout, lse, dlse if dlse is not None else lse, delta, cu_qa,
                *_strides3(out, varlen), *_strides3(dout, varlen), *ls, seq_q, h,
                VARLEN=varlen, HAS_DLSE=dlse is not None, HEAD_D=d, BLOCK_M=bm, num_warps=DELTA_WARPS)
        if seq_k:
            _attn_bwd_dkdv[(triton_cdiv(seq_k, cfg_kv.block_n), batch * hkv)](
                q, k, v, dout, lse, delta, dk, dv, cu_qa, cu_ka,
                *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(dout, varlen),
                *_strides3(dk, varlen), *_strides3(dv, varlen), *ls, seq_q, seq_k, hkv, h // hkv,
                scale * LOG2E, scale, left, right, BLOCK_M=cfg_kv.block_m, BLOCK_N=cfg_kv.block_n, **flags,
                TMA=tma_kv, num_warps=cfg_kv.num_warps, num_stages=cfg_kv.num_stages)
        if seq_q:
            _attn_bwd_dq[(triton_cdiv(seq_q, cfg_q.block_m), batch * h)](
                q, k, v, dout, lse, delta, dq, cu_qa, cu_ka,
                *_strides3(q, varlen), *_strides3(k, varlen), *_strides3(v, varlen), *_strides3(dout, varlen),
                *_strides3(dq, varlen), *ls, seq_q, seq_k, h, h // hkv, scale * LOG2E, scale, left, right,
                BLOCK_M=cfg_q.block_m, BLOCK_N=cfg_q.block_n, **flags, TMA=tma_q, num_warps=cfg_q.num_warps,
                num_stages=cfg_q.num_stages)
    return dq, dk, dv


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _prepare(q, k, v, causal, scale, window, cu_seqlens, max_seqlen):
    varlen = cu_seqlens is not None
    q, k, v = _check_qkv(q, k, v, varlen)
    left, right = resolve_window(causal, window)
    if varlen:
        cu_q, cu_k, max_q, max_k = _check_cu(cu_seqlens, max_seqlen, q, k)
    else:
        if max_seqlen is not None:
            raise ValueError("max_seqlen: only meaningful with cu_seqlens (packed batches); got it without")
        cu_q = cu_k = None
        max_q, max_k = q.shape[1], k.shape[1]
    return q, k, v, cu_q, cu_k, max_q, max_k, _scale(scale, q.shape[-1]), left, right


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None,
              window: int | tuple[int, int] | None = None,
              cu_seqlens: torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None = None,
              max_seqlen: int | tuple[int, int] | None = None,
              return_lse: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention (prefill): softmax(q k^T * scale + mask) v, fp32 accumulation.

    q [B, S_q, H, D], k and v [B, S_k, H_kv, D] (H_kv divides H: GQA/MQA, heads shared without copies), float16
    or bfloat16, D in 16..256 (powers of two). Any strides with a contiguous last dim (a [B, H, S, D] tensor as
    ``x.transpose(1, 2)``). Packed batches: q [total_q, H, D], k/v [total_k, H_kv, D] and ``cu_seqlens`` int32
    [B + 1] (or a (cu_q, cu_k) pair), ``max_seqlen`` an int or a pair (computed with a host sync if omitted;
    the offsets are then checked too; given on a GPU, both are trusted: no sync).
    ``causal``: key j visible from query i when j <= i + S_k - S_q (bottom-right aligned); ``window``: see
    `resolve_window`. ``scale`` defaults to 1/sqrt(D). Returns out (q's layout, contiguous) and, with
    ``return_lse``, the fp32 logsumexp [B, H, S_q] (packed: [H, total_q]); a query with no visible key gives
    zeros and -inf. Differentiable (the backward is ``attention_backward``) and traceable by torch.compile.
    """
    q, k, v, cu_q, cu_k, max_q, max_k, sc, left, right = _prepare(q, k, v, causal, scale, window, cu_seqlens,
                                                                   max_seqlen)
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (q.requires_grad or k.requires_grad
                                                                       or v.requires_grad)):
        out, lse = attention_op(q, k, v, cu_q, cu_k, max_q, max_k, sc, left, right)
    else:
        out, lse = _forward(q, k, v, cu_q, cu_k, max_q, max_k, sc, left, right, store_lse=return_lse)
    return (out, lse) if return_lse else out


def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, dout: torch.Tensor,
                       lse: torch.Tensor, causal: bool = False, scale: float | None = None,
                       window: int | tuple[int, int] | None = None,
                       cu_seqlens: torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None = None,
                       max_seqlen: int | tuple[int, int] | None = None) -> tuple[torch.Tensor, ...]:
    """(dq, dk, dv) of `attention` from what its forward saves: q, k, v, out, lse, and the incoming dout.

    dk and dv are summed over the query heads sharing a kv head, in a fixed order (deterministic, no atomics).
    """
    q, k, v, cu_q, cu_k, max_q, max_k, sc, left, right = _prepare(q, k, v, causal, scale, window, cu_seqlens,
                                                                   max_seqlen)
    out = _check_like("out", out, q)
    dout = _check_like("dout", dout, q)
    lse = require_tensor("lse", lse)
    want = (q.shape[1], q.shape[0]) if cu_q is not None else (q.shape[0], q.shape[2], q.shape[1])
    if lse.dtype != torch.float32 or tuple(lse.shape) != want:
        raise ValueError(f"lse: expected a float32 tensor of shape {want}, got {_dtype_name(lse.dtype)} "
                         f"{tuple(lse.shape)}")
    require_same_device("lse", lse, "q", q)
    lse = lse.contiguous()
    if torch.compiler.is_compiling():
        return attention_backward_op(q, k, v, out, dout, lse, None, cu_q, cu_k, max_q, max_k, sc, left, right)
    return _backward(q, k, v, out, dout, lse, None, cu_q, cu_k, max_q, max_k, sc, left, right)


def _check_like(name: str, t: object, q: torch.Tensor) -> torch.Tensor:
    t = require_tensor(name, t)
    if t.shape != q.shape:
        raise ValueError(f"{name}: expected shape {tuple(q.shape)} (same as q), got {tuple(t.shape)}")
    if t.dtype != q.dtype:
        raise TypeError(f"{name}: expected dtype {_dtype_name(q.dtype)} (same as q), got {_dtype_name(t.dtype)}")
    require_same_device(name, t, "q", q)
    return t if t.stride(-1) == 1 or t.shape[-1] == 1 else t.contiguous()  # (head dim must be contiguous)


# --- the torch custom ops: opaque to torch.compile (fake implementations give the output shapes); autograd saves
# q, k, v, out and lse and calls the backward op. left/right = -1: unbounded.
_LIB = "ridgeline"


@torch.library.custom_op(f"{_LIB}::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_q: torch.Tensor | None,
                 cu_k: torch.Tensor | None, max_q: int, max_k: int, scale: float, left: int,
                 right: int) -> tuple[torch.Tensor, torch.Tensor]:
    return _forward(q, k, v, cu_q, cu_k, max_q, max_k, scale, left, right)


@attention_op.register_fake
def _(q, k, v, cu_q, cu_k, max_q, max_k, scale, left, right):
    return torch.empty_like(q, memory_format=torch.contiguous_format), _new_lse(q, cu_q is not None)


@torch.library.custom_op(f"{_LIB}::attention_backward", mutates_args=())
def attention_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                          dout: torch.Tensor, lse: torch.Tensor, dlse: torch.Tensor | None,
                          cu_q: torch.Tensor | None, cu_k: torch.Tensor | None, max_q: int, max_k: int,
                          scale: float, left: int, right: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _backward(q, k, v, out, dout, lse, dlse, cu_q, cu_k, max_q, max_k, scale, left, right)


@attention_backward_op.register_fake
def _(q, k, v, out, dout, lse, dlse, cu_q, cu_k, max_q, max_k, scale, left, right):
    fresh = torch.contiguous_format
    return (torch.empty_like(q, memory_format=fresh), torch.empty_like(k, memory_format=fresh),
            torch.empty_like(v, memory_format=fresh))


def _setup_context(ctx, inputs, output) -> None:
    q, k, v, cu_q, cu_k, max_q, max_k, scale, left, right = inputs
    out, lse = output
    ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k)
    ctx.args = (max_q, max_k, scale, left, right)
    ctx.set_materialize_grads(False)  # an unused lse gives no gradient: no zero tensor, no extra work


def _autograd_backward(ctx, dout, dlse):
    q, k, v, out, lse, cu_q, cu_k = ctx.saved_tensors
    if dout is None:
        dout = torch.zeros_like(out)
    dout = dout.to(out.dtype)
    if dout.stride(-1) != 1:
        dout = dout.contiguous()  # (the head dim must be contiguous; autograd may hand an expanded gradient)
    if dlse is not None:
        dlse = dlse.to(torch.float32).contiguous()
    dq, dk, dv = attention_backward_op(q, k, v, out, dout, lse, dlse, cu_q, cu_k, *ctx.args)
    return dq, dk, dv, None, None, None, None, None, None, None


attention_op.register_autograd(_autograd_backward, setup_context=_setup_context)

__all__ = ["attention", "attention_backward", "resolve_window"]
