"""Host side of the serving form: `rotary_embedding`, called exactly as vLLM calls its op, its argument checks, the
launch rules (rules.py) and the launch, and the torch custom op `ridgeline::rotary_embedding` (it mutates query
and key) that torch.compile sees.

Host overhead matters here (decode calls are launch-bound): a call's layout is validated once per distinct
signature (shapes, strides, dtypes, devices, head_size, is_neox) and cached; a later call with the same signature
goes straight to the compiled kernel through `CachedLauncher`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ridgeline.lib.fastlaunch import CachedLauncher
from ridgeline.lib.launch import (
    FLOAT_DTYPES,
    multiprocessor_count,
    require_dtype,
    require_runnable_device,
    require_same_device,
    require_tensor,
)
from ridgeline.ops.rotary.kernel import INTERPRETED, _rotary_embedding_kernel
from ridgeline.ops.rotary.rules import SERVING_RULES, LaunchPlan, RotaryCase, RotaryConfig, choose, resolve

POSITION_DTYPES = (torch.int64, torch.int32)
MAX_SIGNATURES = 4096


@dataclass(frozen=True)
class _Call:
    """A validated call layout (strides in elements)."""

    tokens: int
    heads_q: int
    heads_k: int
    half: int
    neox: bool
    q_tok: int
    q_head: int
    k_tok: int
    k_head: int
    cache_stride: int
    max_position: int
    plan: LaunchPlan
    copy_positions: bool  # positions not contiguous (a [B, S] view): copied per call (a few bytes a token)


_CALLS: dict[tuple, _Call] = {}
_LAUNCHER = CachedLauncher(_rotary_embedding_kernel)


def serving_config(tokens: int, heads_q: int, heads_k: int, rot_dim: int, dtype: torch.dtype,
                   device: torch.device | str) -> RotaryConfig:
    """The config SERVING_RULES give a call (what `rotary_embedding` launches with unless told otherwise)."""
    sms = multiprocessor_count(torch.device(device))
    return choose(SERVING_RULES, RotaryCase(tokens, heads_q, heads_k, rot_dim // 2, dtype.itemsize, sms))


def _token_stride(name: str, t: torch.Tensor, lead: int) -> int:
    """One stride between consecutive tokens of t's first `lead` dims (they must merge without a copy)."""
    dims = [(t.shape[i], t.stride(i)) for i in range(lead) if t.shape[i] != 1]
    if not dims:
        return 0
    stride = expect = dims[-1][1]
    for size, s in reversed(dims):
        if s != expect:
            raise ValueError(f"{name}: token dims of shape {tuple(t.shape[:lead])} and strides {t.stride()[:lead]} "
                             "cannot be addressed as one token stride (it is written in place, so it is not copied)")
        expect = s * size
    return stride


def _heads(name: str, t: object, positions: torch.Tensor, head_size: int, dtype: torch.dtype | None
           ) -> tuple[int, int, int]:
    """(heads, token stride, head stride) of query or key: [*positions.shape, H * head_size] or [..., H, head_size]."""
    t = require_tensor(name, t)
    if dtype is None:
        require_dtype(name, t)
    elif t.dtype != dtype:
        raise TypeError(f"{name}: expected dtype {str(dtype).replace('torch.', '')} (query's), got "
                        f"{str(t.dtype).replace('torch.', '')}")
    lead = positions.dim()
    if tuple(t.shape[:lead]) != tuple(positions.shape):
        raise ValueError(f"{name}: leading dims {tuple(t.shape[:lead])} must equal positions' shape "
                         f"{tuple(positions.shape)}")
    rest = t.shape[lead:]
    if len(rest) == 1:
        if rest[0] == 0 or rest[0] % head_size:
            raise ValueError(f"{name}: last dim {rest[0]} is not a positive multiple of head_size {head_size}")
        heads, head_stride = rest[0] // head_size, head_size
    elif len(rest) == 2:
        if rest[1] != head_size or rest[0] == 0:
            raise ValueError(f"{name}: expected [..., heads, head_size={head_size}], got shape {tuple(t.shape)}")
        heads, head_stride = rest[0], t.stride(-2) if rest[0] > 1 else head_size
    else:
        raise ValueError(f"{name}: expected shape [*positions.shape, heads * head_size] or [*positions.shape, heads, "
                         f"head_size], got {tuple(t.shape)}")
    if t.stride(-1) != 1 and t.shape[-1] > 1:
        raise ValueError(f"{name}: the last dim must be contiguous (stride 1), got stride {t.stride(-1)}")
    if heads > 1 and head_stride < head_size:
        raise ValueError(f"{name}: heads overlap (head stride {head_stride} < head_size {head_size}); cannot write")
    tok = _token_stride(name, t, lead)
    if positions.numel() > 1 and tok < (heads - 1) * head_stride + head_size:
        raise ValueError(f"{name}: tokens overlap (token stride {tok} < {heads} heads of {head_size}); cannot write")
    if t.device.type != "cuda":
        require_runnable_device(name, t)
    return heads, tok, head_stride


def _validate(positions: object, query: object, key: object, head_size: object, cache: object, is_neox: object,
              config: RotaryConfig | None) -> _Call:
    positions = require_tensor("positions", positions)
    if positions.dtype not in POSITION_DTYPES:
        raise TypeError(f"positions: expected dtype int64 or int32, got {str(positions.dtype).replace('torch.', '')}")
    if positions.dim() not in (1, 2):
        raise ValueError(f"positions: expected shape [T] or [B, S], got {tuple(positions.shape)}")
    if type(head_size) is not int:
        raise TypeError(f"head_size: expected an int, got {type(head_size).__name__}")
    if head_size < 2:
        raise ValueError(f"head_size: expected an int >= 2, got {head_size}")
    if type(is_neox) is not bool:
        raise TypeError(f"is_neox: expected a bool, got {type(is_neox).__name__}")
    heads_q, q_tok, q_head = _heads("query", query, positions, head_size, None)
    cache = require_tensor("cos_sin_cache", cache)
    require_dtype("cos_sin_cache", cache)
    if cache.dim() != 2 or cache.shape[0] == 0:
        raise ValueError(f"cos_sin_cache: expected shape [max_position >= 1, rot_dim], got {tuple(cache.shape)}")
    rot = cache.shape[1]
    if rot % 2 or not 2 <= rot <= head_size:
        raise ValueError(f"cos_sin_cache: rot_dim (its last dim) must be even and in [2, head_size={head_size}], "
                         f"got {rot}")
    if cache.stride(1) != 1:
        raise ValueError(f"cos_sin_cache: the last dim must be contiguous (stride 1), got stride {cache.stride(1)}")
    require_same_device("positions", positions, "query", query)
    require_same_device("cos_sin_cache", cache, "query", query)
    heads_k, k_tok, k_head = 0, 0, 0
    if key is not None:
        heads_k, k_tok, k_head = _heads("key", key, positions, head_size, query.dtype)
        require_same_device("key", key, "query", query)
    tokens = positions.numel()
    if config is not None and not isinstance(config, RotaryConfig):
        raise TypeError(f"config: expected a RotaryConfig (rules.py) or None, got {type(config).__name__}")
    if config is None:
        config = serving_config(tokens, heads_q, heads_k, rot, query.dtype, query.device)
    plan = resolve(config, heads_q, heads_k, rot // 2)
    return _Call(tokens, heads_q, heads_k, rot // 2, is_neox, q_tok, q_head, k_tok, k_head, cache.stride(0),
                 cache.shape[0], plan, not positions.is_contiguous())


def _signature(positions, query, key, head_size, cache, is_neox, config) -> tuple:
    """Everything `_validate` depends on (AttributeError for a non-tensor: then `_validate` says what is wrong)."""
    k = None if key is None else (key.shape, key.stride(), key.dtype, key.device)
    return (positions.shape, positions.stride(), positions.dtype, positions.device, query.shape, query.stride(),
            query.dtype, query.device, k, cache.shape, cache.stride(), cache.dtype, cache.device, type(head_size),
            head_size, type(is_neox), is_neox, config)


def rotary_embedding(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor | None,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool = True,
    *,
    config: RotaryConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Rotary position embedding, in place on ``query`` and ``key``, as vLLM's ``rotary_embedding`` op: returns
    ``(query, key)``.

    ``positions`` int64 (or int32) ``[T]`` or ``[B, S]``; ``query`` ``[*positions.shape, Hq * head_size]`` or
    ``[*positions.shape, Hq, head_size]``, ``key`` likewise with Hk heads (or None), same dtype (fp32, fp16 or
    bf16); ``cos_sin_cache`` ``[max_position, rot_dim]`` (any float dtype) holds cos in its first rot_dim / 2
    columns and sin in the rest. The first rot_dim columns of every head are rotated, NeoX style (halves, with
    ``is_neox``) or GPT-J style (interleaved pairs); the others are neither read nor written. Math in float32,
    one rounding. Tokens and heads may be strided (q and k as views of a fused qkv buffer); the last dim must be
    contiguous. A position outside ``[0, max_position)`` is not read: its token's rotated columns become NaN.
    ``config`` overrides the launch rules (rules.py; the tuning driver uses it).
    """
    if torch.compiler.is_compiling():  # torch.compile: an opaque custom op that mutates query and key
        rotary_embedding_op(positions, query, key, head_size, cos_sin_cache, is_neox)
        return query, key
    try:
        sig = _signature(positions, query, key, head_size, cos_sin_cache, is_neox, config)
        call = _CALLS.get(sig)
    except (AttributeError, TypeError):  # not tensors (TypeError: an unhashable argument)
        sig, call = None, None
    if call is None:
        call = _validate(positions, query, key, head_size, cos_sin_cache, is_neox, config)
        if sig is not None:
            if len(_CALLS) >= MAX_SIGNATURES:  # many distinct layouts: start over, stay bounded
                _CALLS.clear()
            _CALLS[sig] = call
    if call.tokens:
        _launch(call, positions.contiguous() if call.copy_positions else positions, query, key, cos_sin_cache)
    return query, key


def _launch(call: _Call, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None,
            cache: torch.Tensor) -> None:
    if query.is_cuda and query.get_device() != torch.cuda.current_device():
        with torch.cuda.device(query.device):  # Triton launches on the current device
            return _launch(call, positions, query, key, cache)
    k = key if key is not None else query  # (K_HEADS = 0: never touched)
    plan = call.plan
    args = (positions, query, k, cache, call.q_tok, call.q_head, call.k_tok, call.k_head, call.cache_stride,
            call.max_position)
    fast_key = None
    if query.is_cuda and _LAUNCHER.enabled():
        # The call (kept alive by the entry: its id cannot be reused) and the 16-byte alignment of each pointer,
        # which Triton specializes on.
        fast_key = (id(call), query.get_device(), positions.data_ptr() & 15, query.data_ptr() & 15,
                    k.data_ptr() & 15, cache.data_ptr() & 15)
        hit = _LAUNCHER.cached(fast_key)
        if hit is not None:
            kernel, (grid, cvals, _) = hit
            _LAUNCHER.run(kernel, grid, args, cvals, fast_key[1])
            return
    constexprs = {"GROUPS": plan.groups, "Q_HEADS": plan.q_heads, "K_HEADS": plan.k_heads, "HALF": call.half,
                  "HALF_P": plan.half_p, "BLOCK_HQ": plan.block_hq, "BLOCK_HK": plan.block_hk, "NEOX": call.neox,
                  "EMULATE": INTERPRETED}
    grid = plan.grid(call.tokens)
    _LAUNCHER.launch(grid, args, constexprs, plan.num_warps, fast_key, (grid, tuple(constexprs.values()), call))


# --- the torch custom op: under torch.compile(fullgraph=True) `rotary_embedding` calls it (opaque to the compiler,
# which knows from mutates_args that query and key are written); its body takes the eager path above.
@torch.library.custom_op("ridgeline::rotary_embedding", mutates_args=("query", "key"))
def rotary_embedding_op(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, head_size: int,
                        cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    rotary_embedding(positions, query, key, head_size, cos_sin_cache, is_neox)


@rotary_embedding_op.register_fake
def _(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None, head_size: int,
      cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    return None


__all__ = ["rotary_embedding", "serving_config", "RotaryConfig", "FLOAT_DTYPES"]
