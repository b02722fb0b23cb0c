"""Host side of the warp-specialized attention forward (kernel_ws.py): when it can run, its TMA views, its launch,
and its ahead-of-time compile for sm_90 (no GPU needed)."""

from __future__ import annotations

import torch

from ridgeline.lib.launch import interpreter_enabled

# Registers a thread: 12 warps start at LAUNCH_REGS (3 warpgroups x 128 threads x 168 fill an SM's 64K); the load
# warp's warpgroup then gives its registers to the two MMA warpgroups (S, P and O of 64 rows each live there).
LAUNCH_REGS, MMA_REGS, LOAD_REGS = 168, 232, 40
BLOCK_M = 128
LOG2E = 1.4426950408889634
HEAD_DIMS = (64, 128, 256)


def block_n(head_d: int) -> int:
    """Keys a K / V tile: 128, or 64 at D = 256 (Q's 64 KB and two stages of 64 x 256 K and V tiles fill 192 KB)."""
    return 64 if head_d > 128 else 128


def _rows_back_to_back(t: torch.Tensor) -> bool:
    """[B, S, H, D] whose tokens hold H * D elements back to back (16-byte aligned): q's 2-D TMA view
    [B * S, H * D] needs the batches back to back too, k's and v's 3-D one [B, S, H * D] a 16-byte batch stride."""
    b, s, h, d = t.shape
    return (t.stride(3) == 1 and (h == 1 or t.stride(2) == d) and (s == 1 or t.stride(1) == h * d)
            and (h * d * t.element_size()) % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0
            and t.data_ptr() % 16 == 0)


def _batches_back_to_back(t: torch.Tensor) -> bool:
    b, s, h, d = t.shape
    return b == 1 or t.stride(0) == s * h * d


def ws_device(device: torch.device) -> bool:
    """A Hopper GPU (sm_90: wgmma is Hopper's alone), not the interpreter."""
    return (device.type == "cuda" and not interpreter_enabled()
            and torch.cuda.get_device_capability(device)[0] == 9)


def ws_kind(dtype: torch.dtype, head_d: int, varlen: bool, left: int, right: int) -> bool:
    """The kind of call the kernel is written for, whatever the tensors: dense or packed batches, keys up to the
    aligned position or all of them (right 0 or none) from a left bound or the first, D 64, 128 or 256, 16-bit."""
    return right <= 0 and dtype in (torch.bfloat16, torch.float16) and head_d in HEAD_DIMS


def _tokens_back_to_back(t: torch.Tensor) -> bool:
    """Packed [T, H, D] whose tokens hold H * D elements back to back (16-byte aligned): the 2-D view
    [T, H * D] of q and the per-sequence views of k and v (kernel_ws.py) address them."""
    n, h, d = t.shape
    return (t.stride(2) == 1 and (h == 1 or t.stride(1) == d) and (n == 1 or t.stride(0) == h * d)
            and (h * d * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0)


def ws_supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, varlen: bool, left: int, right: int) -> bool:
    """Whether the Gluon forward takes this call: its kind (`ws_kind`), on sm_90, with tensors whose layout its TMA
    views can address."""
    if not (q.is_cuda and ws_kind(q.dtype, q.shape[-1], varlen, left, right)):
        return False
    if varlen:
        if min(q.shape[0], q.shape[1], k.shape[0]) == 0 or not all(_tokens_back_to_back(t) for t in (q, k, v)):
            return False
    elif min(q.shape[0], q.shape[1], q.shape[2], k.shape[1]) == 0:
        return False  # (empty: the caller's early return)
    elif not (all(_rows_back_to_back(t) for t in (q, k, v)) and _batches_back_to_back(q)):
        return False
    return ws_device(q.device)


def items(seq_q: int, batch_heads: int, pairs: bool) -> int:
    """The work items of a launch: query tiles (pairs of them with `pairs`) of every (batch, head)."""
    n_m = -(-seq_q // BLOCK_M)
    return (-(-n_m // 2) if pairs else n_m) * batch_heads


def launch_ws(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
              scale: float, causal: bool, store_lse: bool, stages: int = 2, overlap: bool = False,
              regs: tuple[int, int] = (MMA_REGS, LOAD_REGS), pingpong: bool = False, pairs: bool = False,
              persistent: bool = False, programs: int | None = None, cu_q: torch.Tensor | None = None,
              cu_k: torch.Tensor | None = None, max_q: int = 0, max_k: int = 0, left: int = -1) -> None:
    """out (and lse) of dense q [B, S_q, H, D], k / v [B, S_k, H_kv, D], or with `cu_q` / `cu_k` (int32 cumulative
    lengths, B + 1) of a packed batch q [T_q, H, D], k / v [T_k, H_kv, D] whose longest sequences are max_q / max_k
    long (out [T_q, H, D], lse [H, T_q]; the caller checked `ws_supported`). `left` >= 0: a sliding window, keys
    from a query's aligned position - left on (with `causal`, to the position).
    `overlap`: each warpgroup's softmax under its previous tile's PV; `pingpong`: the warpgroups take turns issuing
    their wgmmas (kernel_ws.py says how; neither changes the bits). `pairs` (causal): a program takes query tiles
    m and n_m - 1 - m, of about equal work together; `persistent`: one program an SM walks the items, the next
    tile's Q and K / V loading under the last one's PV and stores (`programs`: that grid's size, the SMs by
    default; tests pass a few to walk many items). Neither changes the bits. `regs`: registers a thread of the MMA
    and of the load warpgroups after the hand-over (2 x MMA + load <= 3 x LAUNCH_REGS)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from ridgeline.lib.launch import ensure_tma_allocator
    from ridgeline.ops.attention.kernel_ws import _attn_fwd_ws

    varlen = cu_q is not None
    if varlen and (persistent or (pairs and causal)):
        # (each program makes its sequence's K / V views in one slot of global scratch: a program of several items
        # would rewrite them while its last item's TMA copies may still read them)
        raise ValueError("launch_ws: packed batches (cu_q) run one query tile a program; got persistent="
                         f"{persistent}, pairs={pairs}")
    if varlen:
        b, seq_q, seq_k = cu_q.shape[0] - 1, max_q, max_k
        h, hkv, d = q.shape[1], k.shape[1], q.shape[2]
        q4, k4, v4 = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)  # one "batch" of all tokens, for the views
        s_ob, s_os, s_oh, s_lb, s_lh = 0, out.stride(0), out.stride(1), 0, lse.stride(0)
        lse_ok = lse.stride(1) == 1
    else:
        b, seq_q, h, d = q.shape
        seq_k, hkv = k.shape[1], k.shape[2]
        q4, k4, v4 = q, k, v
        s_ob, s_os, s_oh, s_lb, s_lh = out.stride(0), out.stride(1), out.stride(2), lse.stride(0), lse.stride(1)
        lse_ok = lse.stride(2) == 1
    el = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16

    def view(t: torch.Tensor, block: list[int]) -> TensorDescriptor:
        # q: [B * S_q, H * D] (rows past a sequence belong to the next one: computed, never stored);
        # k, v: [B, S_k, H_kv * D] (keys past a sequence arrive as zeros; packed batches read views of each
        # sequence made on the device, kernel_ws.py, and these only for their layout)
        n = t.shape[2] * d
        shape, strides = ([t.shape[0] * t.shape[1], n], [n, 1]) if len(block) == 2 else (
            [t.shape[0], t.shape[1], n], [t.shape[1] * n if varlen else t.stride(0), n, 1])
        flat = t.as_strided(shape, strides)
        return TensorDescriptor(flat, shape, strides, block, gl.NVMMASharedLayout.get_default_for(block, el))

    if stages not in (2, 3) or out.stride(-1) != 1 or not lse_ok or 2 * regs[0] + regs[1] > 3 * LAUNCH_REGS:
        raise ValueError(f"launch_ws: stages 2 or 3 (shared memory), contiguous out rows and lse, registers within "
                         f"the launch's; got {stages}, out strides {out.stride()}, lse strides {lse.stride()}, "
                         f"regs {regs}")
    pairs = pairs and causal
    n_items = items(seq_q, b * h, pairs)
    grid = n_items
    if persistent:  # (one program an SM: 160-192 KB of shared memory each)
        sms = programs or torch.cuda.get_device_properties(q.device).multi_processor_count
        grid = max(1, min(n_items, sms))
    if varlen:
        ensure_tma_allocator()  # (the per-sequence views are made on the device, in global scratch)
    with torch.cuda.device(q.device):
        _attn_fwd_ws[(grid,)](
            view(q4, [BLOCK_M, d]), view(k4, [1, block_n(d), d]), view(v4, [1, block_n(d), d]), k, v,
            cu_q if varlen else lse, cu_k if varlen else lse, out, lse, s_ob, s_os, s_oh, s_lb, s_lh, seq_q, seq_k,
            h, h // hkv, scale * LOG2E, max(left, 0), n_items,
            CAUSAL=causal, STORE_LSE=store_lse, STAGES=stages, OVERLAP=overlap, PINGPONG=pingpong, PAIRS=pairs,
            PERSISTENT=persistent, VARLEN=varlen, HAS_LEFT=left >= 0, MMA_REGS=regs[0], LOAD_REGS=regs[1],
            num_warps=4, maxnreg=LAUNCH_REGS)


def compile_for_sm90(head_d: int = 128, causal: bool = True, stages: int = 2, overlap: bool = False,
                     regs: tuple[int, int] = (MMA_REGS, LOAD_REGS), pingpong: bool = False,
                     pairs: bool = False, persistent: bool = False, varlen: bool = False,
                     window: bool = False) -> dict:
    """Compile the Gluon forward ahead of time for sm_90, no GPU needed (run it without the CPU interpreter):
    shared memory, ptxas' spill bytes and SASS counts (HGMMA: bf16 wgmma; USETMAXREG: the register hand-over;
    UTMALDG: TMA loads; SYNCS: mbarriers; MUFU: the exp2s), and `ex2_under_pv`: the exp2s ptxas left between the
    wait for S (`WARPGROUP.DEPBAR.LE gsb0, 0x1`: the overlapped loop's) and the wait for PV (0 without `overlap`)."""
    from ridgeline.lib.gluon_aot import compile_sm90, nvmma_descriptor
    from ridgeline.ops.attention.kernel_ws import _attn_fwd_ws

    types = {"q_desc": nvmma_descriptor([BLOCK_M, head_d], "bf16"), "out_ptr": "*bf16", "lse_ptr": "*fp32",
             "k_desc": nvmma_descriptor([1, block_n(head_d), head_d], "bf16"), "qk_scale": "fp32",
             "v_desc": nvmma_descriptor([1, block_n(head_d), head_d], "bf16"), "k_ptr": "*bf16", "v_ptr": "*bf16",
             "cu_q": "*i32", "cu_k": "*i32"}
    for name in ("s_ob", "s_os", "s_oh", "s_lb", "s_lh", "seq_q", "seq_k", "H", "GROUP", "left", "n_items"):
        types[name] = "i32"
    consts = {"CAUSAL": causal, "STORE_LSE": True, "STAGES": stages, "OVERLAP": overlap, "PINGPONG": pingpong,
              "PAIRS": pairs and causal, "PERSISTENT": persistent, "VARLEN": varlen, "HAS_LEFT": window,
              "MMA_REGS": regs[0], "LOAD_REGS": regs[1]}
    out = compile_sm90(_attn_fwd_ws, types, consts, 4, LAUNCH_REGS,
                       ("HGMMA", "USETMAXREG", "UTMALDG", "SYNCS", "MUFU"), keep_sass=True)
    out["ex2_under_pv"] = _ex2_under_pv(out.pop("sass_text"))
    return out


def _ex2_under_pv(sass: str) -> int:
    count, inside = 0, False
    for line in sass.splitlines():
        if "DEPBAR.LE gsb0, 0x1" in line:
            inside, count = True, 0
        elif "DEPBAR.LE gsb0, 0x0" in line and inside:
            return count
        elif inside and "MUFU.EX2" in line:
            count += 1
    return 0
