"""Host side of paged decode attention: `paged_decode_attention`, its argument checks, the launch (rules.py picks
the tile and the split) and the torch custom op `ridgeline::paged_decode_attention` that torch.compile sees.

Decode calls are launch-bound at small batches: a call's layout is validated once per distinct signature (shapes,
strides, dtypes, devices, scale kinds) and cached; later calls go straight to the compiled kernels through
`CachedLauncher`. Nothing here reads a device tensor on the host (no synchronization: CUDA-graph safe): the split is
planned from the block table's width, never from seq_lens' values.

Inference only: there is no backward (decode attention is not trained through); a q that requires grad gets an
output without a gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    FLOAT_DTYPES,
    multiprocessor_count,
    require_dtype,
    require_runnable_device,
    require_same_device,
    require_tensor,
)
from ridgeline.ops.paged_attention.kernel import INTERPRETED, _merge_kernel, _paged_decode_kernel
from ridgeline.ops.paged_attention.rules import DecodeCase, DecodeConfig, choose, split_tokens_for

FP8_KV = (torch.float8_e4m3fn,)
MAX_ROWS = 128  # G * Q rows held by one program (registers: acc [rows, D] fp32)
MAX_HEAD_DIM = 256
MAX_SIGNATURES = 4096


@dataclass(frozen=True)
class _Call:
    batch: int
    q_tokens: int
    heads_q: int
    heads_kv: int
    head_dim: int
    page: int
    capacity: int
    scale: float
    scale_from_ptr: bool
    fp32_dot: bool
    config: DecodeConfig
    split_tokens: int
    n_splits: int
    block_m: int
    block_d: int


_CALLS: dict[tuple, _Call] = {}
_MAIN = CachedLauncher(_paged_decode_kernel)
_MERGE = CachedLauncher(_merge_kernel)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def decode_config(capacity: int, heads_kv: int, rows: int, head_dim: int, kv_itemsize: int,
                  device: torch.device | str) -> DecodeConfig:
    """The config the rules give a call (what `paged_decode_attention` launches with unless told otherwise)."""
    sms = multiprocessor_count(torch.device(device))
    return choose(DecodeCase(capacity, heads_kv, rows, head_dim, kv_itemsize, sms))


def _contiguous_last(name: str, t: torch.Tensor) -> None:
    if t.stride(-1) != 1 and t.shape[-1] > 1:
        raise ValueError(f"{name}: the last dim must be contiguous (stride 1), got stride {t.stride(-1)}")


def _scale_kind(name: str, s: object, device: torch.device) -> bool:
    """True: a 1-element tensor (read on the device); False: a Python number or None."""
    if s is None or (isinstance(s, (int, float)) and not isinstance(s, bool)):
        if s is not None and not (math.isfinite(s) and s > 0):
            raise ValueError(f"{name}: expected a positive finite number, got {s}")
        return False
    if isinstance(s, torch.Tensor):
        if s.numel() != 1 or s.dtype != torch.float32:
            raise ValueError(f"{name}: expected a float, or a float32 tensor of one element; got {_name(s.dtype)} "
                             f"of shape {tuple(s.shape)}")
        if s.device != device:
            raise ValueError(f"{name} is on {s.device} but q is on {device}: put them on one device")
        return True
    raise TypeError(f"{name}: expected a float, a float32 tensor of one element, or None; got {type(s).__name__}")


def _check_scale(scale: object) -> None:
    # > 0: the custom op's schema carries None as -1.0, so a negative scale would turn into 1/sqrt(D) there.
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"scale: expected a float or None, got {type(scale).__name__}")
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale: expected a finite number > 0 or None (1/sqrt(D)), got {scale}")


def _validate(q, k_cache, v_cache, block_table, seq_lens, scale, k_scale, v_scale, config) -> _Call:
    q = require_tensor("q", q)
    require_dtype("q", q)
    if q.dim() not in (3, 4):
        raise ValueError(f"q: expected [B, Hq, D] or [B, Q, Hq, D] (Q query tokens), got shape {tuple(q.shape)}")
    batch, q_tokens = q.shape[0], (q.shape[1] if q.dim() == 4 else 1)
    heads_q, head_dim = q.shape[-2], q.shape[-1]
    _contiguous_last("q", q)
    for name, c in (("k_cache", k_cache), ("v_cache", v_cache)):
        c = require_tensor(name, c)
        if c.dtype != q.dtype and c.dtype not in FP8_KV:
            raise TypeError(f"{name}: expected q's dtype ({_name(q.dtype)}) or float8_e4m3fn, got {_name(c.dtype)}")
        if c.dim() != 4:
            raise ValueError(f"{name}: expected [num_blocks, block_size, Hkv, D], got shape {tuple(c.shape)}")
        _contiguous_last(name, c)
        require_same_device(name, c, "q", q)
    if v_cache.dtype != k_cache.dtype or v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache: expected k_cache's shape {tuple(k_cache.shape)} and dtype {_name(k_cache.dtype)}, "
                         f"got {tuple(v_cache.shape)} {_name(v_cache.dtype)}")
    num_blocks, page, heads_kv, kd = k_cache.shape
    if kd != head_dim:
        raise ValueError(f"k_cache: head dim {kd} differs from q's {head_dim}")
    if num_blocks < 1 and batch > 0:  # (every sequence's block ids would point past the cache)
        raise ValueError(f"k_cache: expected at least one block for {batch} sequences, got shape "
                         f"{tuple(k_cache.shape)}")
    if page < 1 or heads_kv < 1 or heads_q < 1 or head_dim < 1 or q_tokens < 1:
        raise ValueError(f"q/k_cache: block_size, heads, head dim and Q must be >= 1 (q {tuple(q.shape)}, "
                         f"k_cache {tuple(k_cache.shape)})")
    if heads_q % heads_kv:
        raise ValueError(f"q: Hq ({heads_q}) must be a multiple of the cache's Hkv ({heads_kv})")
    if head_dim > MAX_HEAD_DIM:
        raise ValueError(f"q: head dim {head_dim} exceeds {MAX_HEAD_DIM}")
    rows = heads_q // heads_kv * q_tokens
    if rows > MAX_ROWS:
        raise ValueError(f"q: (Hq / Hkv) * Q = {rows} rows per kv head exceeds {MAX_ROWS}")
    block_table = require_tensor("block_table", block_table)
    if block_table.dtype != torch.int32 or block_table.dim() != 2 or block_table.shape[0] != batch:
        raise ValueError(f"block_table: expected int32 [B={batch}, max_blocks_per_seq], got {_name(block_table.dtype)} "
                         f"of shape {tuple(block_table.shape)}")
    _contiguous_last("block_table", block_table)
    require_same_device("block_table", block_table, "q", q)
    seq_lens = require_tensor("seq_lens", seq_lens)
    if seq_lens.dtype != torch.int32 or tuple(seq_lens.shape) != (batch,) or (batch > 1 and seq_lens.stride(0) != 1):
        raise ValueError(f"seq_lens: expected contiguous int32 [B={batch}], got {_name(seq_lens.dtype)} of shape "
                         f"{tuple(seq_lens.shape)}")
    require_same_device("seq_lens", seq_lens, "q", q)
    if q.device.type != "cuda":
        require_runnable_device("q", q)
    _check_scale(scale)
    ks_ptr = _scale_kind("k_scale", k_scale, q.device)
    vs_ptr = _scale_kind("v_scale", v_scale, q.device)
    if ks_ptr != vs_ptr:
        raise ValueError("k_scale/v_scale: pass both as tensors, or each as a number or None")
    capacity = block_table.shape[1] * page
    if config is None:
        config = decode_config(capacity, heads_kv, rows, head_dim, k_cache.dtype.itemsize, q.device)
    split_tokens = split_tokens_for(config, capacity, heads_kv, multiprocessor_count(q.device))
    n_splits = max(1, triton.cdiv(capacity, split_tokens))
    return _Call(batch, q_tokens, heads_q, heads_kv, head_dim, page, capacity,
                 1.0 / math.sqrt(head_dim) if scale is None else float(scale), ks_ptr or vs_ptr,
                 INTERPRETED or q.dtype == torch.float32, config, split_tokens, n_splits,
                 max(16, triton.next_power_of_2(rows)), max(16, triton.next_power_of_2(head_dim)))


def _signature(q, k_cache, v_cache, block_table, seq_lens, scale, k_scale, v_scale, config) -> tuple:
    """Everything `_validate` depends on (AttributeError for a non-tensor: then `_validate` says what is wrong)."""
    def kind(s):
        return (s.shape, s.dtype, s.device) if isinstance(s, torch.Tensor) else (type(s), s)

    return (q.shape, q.stride(), q.dtype, q.device, k_cache.shape, k_cache.stride(), k_cache.dtype, k_cache.device,
            v_cache.shape, v_cache.stride(), v_cache.dtype, v_cache.device, block_table.shape, block_table.stride(),
            block_table.dtype, block_table.device, seq_lens.shape, seq_lens.stride(), seq_lens.dtype,
            seq_lens.device, type(scale), scale, kind(k_scale), kind(v_scale), config)


def plan_for(q, k_cache, v_cache, block_table, seq_lens, scale=None, k_scale=None, v_scale=None,
             config: DecodeConfig | None = None) -> _Call:
    """The validated launch plan of a call (its config, split size and number of splits)."""
    try:
        sig = _signature(q, k_cache, v_cache, block_table, seq_lens, scale, k_scale, v_scale, config)
        call = _CALLS.get(sig)
    except (AttributeError, TypeError):  # not tensors (TypeError: an unhashable argument)
        sig, call = None, None
    if call is None:
        call = _validate(q, k_cache, v_cache, block_table, seq_lens, scale, k_scale, v_scale, config)
        if sig is not None:
            if len(_CALLS) >= MAX_SIGNATURES:  # many distinct layouts: start over, stay bounded
                _CALLS.clear()
            _CALLS[sig] = call
    return call


def paged_decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float | None = None,
    k_scale: float | torch.Tensor | None = None,
    v_scale: float | torch.Tensor | None = None,
    *,
    config: DecodeConfig | None = None,
) -> torch.Tensor:
    """Attention of a few new query tokens per sequence over a paged KV cache (serving engines' layout).

    ``q`` ``[B, Hq, D]`` (one token per sequence) or ``[B, Q, Hq, D]`` (speculative decoding: the Q tokens are the
    last Q of the sequence, already written to the cache, causal among themselves: token i sees keys
    ``[0, seq_len - Q + i]``), fp32, fp16 or bf16. ``k_cache``/``v_cache`` ``[num_blocks, block_size, Hkv, D]`` in
    q's dtype or float8_e4m3fn (K = k_cache * k_scale, V = v_cache * v_scale; the scales are per tensor, a float
    or a float32 tensor of one element, default 1); Hkv divides Hq (GQA). ``block_table`` int32
    ``[B, max_blocks_per_seq]``: token t of sequence b sits in block ``block_table[b, t // block_size]``, slot
    ``t % block_size`` (blocks in any order). ``seq_lens`` int32 ``[B]``: tokens in each sequence's cache,
    including the Q new ones, at most ``max_blocks_per_seq * block_size`` (not checked: that would read the
    device). ``scale`` (> 0) defaults to ``1 / sqrt(D)``. Returns q's shape and dtype; a row that sees no key (seq_len
    0, or the first tokens when seq_len < Q) is zeros. Any strides with a contiguous last dim.
    ``config`` overrides the launch rules (rules.py; the tuning driver uses it).
    """
    if torch.compiler.is_compiling():  # torch.compile: an opaque custom op
        _check_scale(scale)
        ks, vs, kt, vt = _split_scales(k_scale, v_scale)
        return paged_decode_attention_op(q, k_cache, v_cache, block_table, seq_lens,
                                         -1.0 if scale is None else float(scale), ks, vs, kt, vt)
    call = plan_for(q, k_cache, v_cache, block_table, seq_lens, scale, k_scale, v_scale, config)
    out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    if call.batch and out.numel():
        _launch(call, q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale, out)
    return out


def _split_scales(k_scale, v_scale):
    """(k float, v float, k tensor or None, v tensor or None) for the custom op's schema."""
    def num(s):
        return 1.0 if s is None or isinstance(s, torch.Tensor) else float(s)

    def ten(s):
        return s if isinstance(s, torch.Tensor) else None

    return num(k_scale), num(v_scale), ten(k_scale), ten(v_scale)


def _launch(call: _Call, q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale, out) -> None:
    if q.is_cuda and q.get_device() != torch.cuda.current_device():
        with torch.cuda.device(q.device):  # Triton launches on the current device
            return _launch(call, q, k_cache, v_cache, block_table, seq_lens, k_scale, v_scale, out)
    cfg = call.config
    split = call.n_splits > 1
    rows = call.batch * call.q_tokens * call.heads_q
    if split:
        part_o = torch.empty((rows * call.n_splits * call.head_dim,), dtype=torch.float32, device=q.device)
        part_lse = torch.empty((rows * call.n_splits,), dtype=torch.float32, device=q.device)
    else:
        part_o = part_lse = out  # (not touched)
    ks_t = k_scale if isinstance(k_scale, torch.Tensor) else (v_scale if isinstance(v_scale, torch.Tensor) else out)
    vs_t = v_scale if isinstance(v_scale, torch.Tensor) else ks_t
    ks = 1.0 if not isinstance(k_scale, (int, float)) else float(k_scale)
    vs = 1.0 if not isinstance(v_scale, (int, float)) else float(v_scale)
    four = q.dim() == 4
    sq = (q.stride(0), q.stride(1) if four else 0, q.stride(-2))
    so = (out.stride(0), out.stride(1) if four else 0, out.stride(-2))
    args = (q, k_cache, v_cache, block_table, seq_lens, out, part_o, part_lse, ks_t, vs_t, call.scale, ks, vs,
            *sq, k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), v_cache.stride(0), v_cache.stride(1),
            v_cache.stride(2), block_table.stride(0), *so, call.split_tokens, call.n_splits)
    constexprs = {"HKV": call.heads_kv, "G": call.heads_q // call.heads_kv, "Q": call.q_tokens, "D": call.head_dim,
                  "BLOCK_D": call.block_d, "PAGE": call.page, "BLOCK_M": call.block_m, "BLOCK_N": cfg.block_n,
                  "SPLIT": split, "SCALE_FROM_PTR": call.scale_from_ptr, "FP32_DOT": call.fp32_dot,
                  "F16_DOTS": cfg.f16_dots and k_cache.dtype in FP8_KV and q.dtype == torch.bfloat16,
                  "EMULATE": INTERPRETED}
    _MAIN.launch(call.batch * call.heads_kv * call.n_splits, args, constexprs, cfg.num_warps,
                 options={"num_stages": cfg.num_stages})
    if split:
        margs = (part_o, part_lse, seq_lens, out, *so, call.split_tokens, call.n_splits)
        mconst = {"HQ": call.heads_q, "Q": call.q_tokens, "D": call.head_dim, "BLOCK_D": call.block_d,
                  "BLOCK_S": max(2, triton.next_power_of_2(call.n_splits)), "EMULATE": INTERPRETED}
        _MERGE.launch(rows, margs, mconst, 4 if call.head_dim >= 128 else 2)


# --- the torch custom op: under torch.compile(fullgraph=True) `paged_decode_attention` calls it (opaque to the
# compiler); its body takes the eager path above. scale < 0 stands for None (the schema has no Optional[float] here).
@torch.library.custom_op("ridgeline::paged_decode_attention", mutates_args=())
def paged_decode_attention_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                              block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float, k_scale: float,
                              v_scale: float, k_scale_t: torch.Tensor | None,
                              v_scale_t: torch.Tensor | None) -> torch.Tensor:
    return paged_decode_attention(q, k_cache, v_cache, block_table, seq_lens, None if scale < 0 else scale,
                                  k_scale if k_scale_t is None else k_scale_t,
                                  v_scale if v_scale_t is None else v_scale_t)


@paged_decode_attention_op.register_fake
def _(q, k_cache, v_cache, block_table, seq_lens, scale, k_scale, v_scale, k_scale_t, v_scale_t) -> torch.Tensor:
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


__all__ = ["paged_decode_attention", "decode_config", "plan_for", "DecodeConfig", "FLOAT_DTYPES"]
