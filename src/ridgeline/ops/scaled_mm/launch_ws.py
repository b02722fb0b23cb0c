"""Host side of the warp-specialized FP8 GEMM (kernel_ws.py): when it can run, its TMA descriptors, its launch."""

from __future__ import annotations

import torch

from ridgeline.lib.launch import interpreter_enabled
from ridgeline.ops.scaled_mm.rules import WS_REGS, TileConfig

# Registers a thread: the kernel starts at LAUNCH_REGS in all 12 warps (3 warpgroups x 4 x 32 threads x 168 fill
# the H200's 64K registers of an SM); the load warp's warpgroup then gives its registers to the two MMA ones, by
# the tile's `ws_regs` (rules.py).
LAUNCH_REGS = 168
_OUT_GL = {}


def ws_device(device: torch.device) -> bool:
    """A Hopper GPU (sm_90: wgmma is Hopper's alone), not the interpreter."""
    return (device.type == "cuda" and not interpreter_enabled()
            and torch.cuda.get_device_capability(device)[0] == 9)


def ws_output(out_dtype: torch.dtype, n: int) -> bool:
    """An output the kernel's TMA store can write: 16-bit, N columns, allocated contiguous (16-byte rows)."""
    return out_dtype in (torch.bfloat16, torch.float16) and (2 * n) % 16 == 0


def ws_call(device: torch.device, out_dtype: torch.dtype, n: int) -> bool:
    """What the launch rules may assume of a call whose fp8 operands are TMA-readable: the kernel runs here and
    its output has rows a TMA store can address."""
    return ws_output(out_dtype, n) and ws_device(device)


def ws_tile(cfg: TileConfig, mode: str) -> bool:
    """The tile the kernel is written for: asked for by the rules, 256 rows (two warpgroups of two 64-row wgmmas)
    or 128 (of one), BLOCK_K 128, and in block mode N tiles of 32 to 128 columns: inside one 128-column weight
    block, so one scale_b value a K step."""
    return (cfg.warp_specialized and cfg.block_m in (128, 256) and cfg.block_k == 128
            and (mode != "block" or cfg.block_n in (32, 64, 128)))


def ws_supported(cfg: TileConfig, a: torch.Tensor, y: torch.Tensor, mode: str) -> bool:
    """Whether the Gluon kernel takes this call: a CUDA sm_90 device (not the interpreter), its tile (`ws_tile`)
    and a 16-bit output whose rows a TMA store can address (16-byte aligned: N a multiple of 8). The caller has
    checked the operands for TMA."""
    if not (ws_tile(cfg, mode) and a.is_cuda and y.dtype in (torch.bfloat16, torch.float16)):
        return False
    if (y.stride(0) * y.element_size()) % 16 or y.data_ptr() % 16:
        return False
    return ws_device(a.device)


def launch_ws(a: torch.Tensor, b: torch.Tensor, y: torch.Tensor, sa: torch.Tensor, sb: torch.Tensor,
              bias: torch.Tensor | None, scale_code: int, strides: tuple[int, int, int, int], cfg: TileConfig,
              sms: int) -> None:
    """y = the scaled product, by the warp-specialized kernel (the caller checked `ws_supported`)."""
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from ridgeline.ops.scaled_mm.kernel_ws import SUB_M, _scaled_mm_ws_kernel

    m, k = a.shape
    n = b.shape[0]
    out_gl = gl.bfloat16 if y.dtype == torch.bfloat16 else gl.float16
    a_block, b_block, c_block = [cfg.block_m, cfg.block_k], [cfg.block_n, cfg.block_k], [int(SUB_M), cfg.block_n]
    a_desc = TensorDescriptor(a, [m, k], [a.stride(0), 1], a_block,
                              gl.NVMMASharedLayout.get_default_for(a_block, gl.float8e4nv))
    b_desc = TensorDescriptor(b, [n, k], [b.stride(0), 1], b_block,
                              gl.NVMMASharedLayout.get_default_for(b_block, gl.float8e4nv))
    c_desc = TensorDescriptor(y, [m, n], [y.stride(0), 1], c_block,
                              gl.NVMMASharedLayout.get_default_for(c_block, out_gl))
    tiles = -(-m // cfg.block_m) * -(-n // cfg.block_n)
    sam, sak, sbn, sbk = strides
    with torch.cuda.device(a.device):
        _scaled_mm_ws_kernel[(max(1, min(tiles, sms)),)](
            a_desc, b_desc, c_desc, sa, sb, bias if bias is not None else y, m, n, k, sam, sak, sbn, sbk,
            SCALE=scale_code, HAS_BIAS=bias is not None, GROUP_M=cfg.group_m, STAGES=cfg.num_stages,
            MMA_REGS=cfg.ws_regs[0], LOAD_REGS=cfg.ws_regs[1], PIPELINE=cfg.ws_pipeline,
            SCALES_AHEAD=cfg.ws_scales_ahead, num_warps=4,
            maxnreg=LAUNCH_REGS)


def compile_for_sm90(scale_code: int, stages: int = 3, has_bias: bool = False, block_m: int = 256,
                     regs: tuple[int, int] = WS_REGS, block_n: int = 128, pipeline: bool = False,
                     keep_sass: bool = False, scales_ahead: bool = False) -> dict:
    """Compile the Gluon kernel ahead of time for sm_90, no GPU needed (run it without the CPU interpreter):
    shared memory, ptxas' spill bytes and SASS counts of what makes the kernel (QGMMA: fp8 wgmma; USETMAXREG: the
    warps' register hand-over; UTMALDG / UTMASTG: TMA; SYNCS: mbarriers)."""
    from ridgeline.lib.gluon_aot import compile_sm90, nvmma_descriptor
    from ridgeline.ops.scaled_mm.kernel_ws import SUB_M, _scaled_mm_ws_kernel

    types = {"a_desc": nvmma_descriptor([block_m, 128], "fp8e4nv"),
             "b_desc": nvmma_descriptor([block_n, 128], "fp8e4nv"),
             "c_desc": nvmma_descriptor([int(SUB_M), block_n], "bf16"), "bias_ptr": "*bf16", "sa_ptr": "*fp32",
             "sb_ptr": "*fp32"}
    for name in ("M", "N", "K", "stride_sam", "stride_sak", "stride_sbn", "stride_sbk"):
        types[name] = "i32"
    consts = {"SCALE": scale_code, "HAS_BIAS": has_bias, "GROUP_M": 8, "STAGES": stages, "MMA_REGS": regs[0],
              "LOAD_REGS": regs[1], "PIPELINE": pipeline, "SCALES_AHEAD": scales_ahead}
    return compile_sm90(_scaled_mm_ws_kernel, types, consts, 4, LAUNCH_REGS,
                        ("QGMMA", "USETMAXREG", "UTMALDG", "UTMASTG", "SYNCS"), keep_sass=keep_sass)
