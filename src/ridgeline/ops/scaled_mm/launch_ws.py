"""Host side of the warp-specialized FP8 GEMM (kernel_ws.py): when it can run, its TMA descriptors, its launch."""

from __future__ import annotations

import torch

from ridgeline.ops.scaled_mm.rules import TileConfig

# Registers a thread: the kernel starts at LAUNCH_REGS in all 12 warps (3 warpgroups x 4 x 32 threads x 168 fill
# the H200's 64K registers of an SM); the load warp's warpgroup then gives its registers to the two MMA ones.
LAUNCH_REGS, MMA_REGS, LOAD_REGS = 168, 232, 40
_OUT_GL = {}


def ws_supported(cfg: TileConfig, a: torch.Tensor, y: torch.Tensor, mode: str) -> bool:
    """Whether the Gluon kernel takes this call: a CUDA sm_90+ device (not the interpreter), the tile it is written
    for (256 rows of two warpgroups, BLOCK_K 128, a 128-column tile in block mode) and a 16-bit output whose rows a
    TMA store can address (16-byte aligned: N a multiple of 8). The caller has checked the operands for TMA."""
    if not (cfg.warp_specialized and a.is_cuda and y.dtype in (torch.bfloat16, torch.float16)):
        return False
    if cfg.block_m != 256 or cfg.block_k != 128 or (mode == "block" and cfg.block_n != 128):
        return False
    if (y.stride(0) * y.element_size()) % 16 or y.data_ptr() % 16:
        return False
    return torch.cuda.get_device_capability(a.device)[0] >= 9


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
            MMA_REGS=MMA_REGS, LOAD_REGS=LOAD_REGS, num_warps=4, maxnreg=LAUNCH_REGS)
