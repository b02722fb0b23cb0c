"""Contracts of the FP8 GEMM and the activation quantizers that feed it.

scaled_mm:               y = (a @ b^T) scaled (+ bias), a [M, K], b [N, K] float8_e4m3fn, y in out_dtype (bf16)
                                           fn(a, b, scale_a, scale_b, out_dtype, bias) -> y
    variants (joined with "+"): the scale mode "tensor" | "row" (the plain case "") | "block"; "bias" (a bias in
    out_dtype), "fp16" / "fp32" (out_dtype), "strided" (a's rows inside a wider buffer), "nmajor" (b stored
    transposed: stride (1, N), the pointer-load path).
quantize_fp8_per_token:  scale[m] = amax|x[m, :]| / 448 (1 if 0), x_fp8 = sat(x / scale)   fn(x) -> (x_fp8, scale)
quantize_fp8_per_group:  the same per row and group of `group` columns       fn(x, group) -> (x_fp8, scale)

The inputs of scaled_mm are what a serving engine feeds it: activations x ~ N(0, 1) and weights w ~ N(0, 0.05^2),
quantized to e4m3 with the mode's scales by torch's own rounding. The reference is the float64 product of the
dequantized operands (a * scale_a expanded) @ (b * scale_b expanded)^T, so every implementation is held to the
same exact number; the tolerance grows with K (fp32 accumulation, and the output's rounding).
The quantizers' reference is float64 amax, the scale rounded to float32, and torch's e4m3 rounding of the
float32 quotient; ours computes exactly that (correctly rounded divisions), so it is held to bitwise equality.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from ridgeline.core.registry import register_impl, register_spec
from ridgeline.core.spec import Case, Cost, Inputs, OpSpec, Shape, Tolerance

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
BLOCK = 128
W_STD = 0.05  # weight scale of the generated inputs (activations: 1)
STRIDE_PAD = 16  # "strided": rows of a sit in a buffer 16 columns wider (still TMA-aligned when K is)

# Llama-3-8B / 70B layers (N, K): the list.
L8 = {"qkv": (6144, 4096), "o": (4096, 4096), "gate_up": (28672, 4096), "down": (4096, 14336)}
L70 = {"qkv": (10240, 8192), "o": (8192, 8192), "gate_up": (57344, 8192), "down": (8192, 28672)}
# ~20 cells of the M list x layers, for the device budget: each layer at a decode, a mid and a large M.
SWEEP: list[Shape] = [
    (1, *L8["o"]), (16, *L8["qkv"]), (64, *L8["gate_up"]), (128, *L8["down"]), (512, *L8["qkv"]),
    (1024, *L8["gate_up"]), (2048, *L8["o"]), (4096, *L8["down"]), (8192, *L8["qkv"]), (16384, *L8["o"]),
    (1, *L70["down"]), (16, *L70["o"]), (256, *L70["qkv"]), (1024, *L70["gate_up"]), (4096, *L70["o"]),
    (8192, *L70["down"]), (4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384),
]
DECODE: list[Shape] = [(m, n, k) for (n, k) in (L8["o"], L8["gate_up"], L70["down"]) for m in (1, 4, 16, 32, 64)]
MODELS: list[Shape] = [(m, n, k) for layers in (L8, L70) for (n, k) in layers.values()
                       for m in (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)]
EDGE: list[Shape] = [(1, 1, 16), (7, 13, 33), (37, 45, 300), (64, 64, 64), (130, 257, 129), (3, 200, 4100),
                     (0, 64, 128), (5, 0, 128), (5, 7, 0)]
CPU: list[Shape] = [(16, 32, 128), (33, 47, 300), (64, 64, 256)]
MODES = ("tensor", "row", "block")
VARIANTS = ("", "tensor", "row", "block", "bias", "fp16", "fp32", "strided", "nmajor")
OUT_EPS = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11, torch.float32: 2.0**-24}


def parse_variant(variant: str) -> dict[str, Any]:
    parts = set(filter(None, variant.split("+")))
    unknown = parts - set(VARIANTS)
    if unknown:
        raise ValueError(f"variant: scaled_mm takes {', '.join(v for v in VARIANTS if v)} joined by '+'; "
                         f"got {variant!r}")
    modes = [p for p in parts if p in MODES]
    if len(modes) > 1:
        raise ValueError(f"variant: one scale mode of {', '.join(MODES)}, got {variant!r}")
    out = torch.float16 if "fp16" in parts else torch.float32 if "fp32" in parts else torch.bfloat16
    return {"mode": modes[0] if modes else "row", "bias": "bias" in parts, "out_dtype": out,
            "strided": "strided" in parts, "nmajor": "nmajor" in parts}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def fp8_round(x: torch.Tensor) -> torch.Tensor:
    """torch's e4m3 rounding of float32 values (nearest even, saturated to +-448)."""
    return x.float().clamp(-FP8_MAX, FP8_MAX).to(FP8)


def quantize_ref(x: torch.Tensor, rows: int, cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    """x quantized in tiles of rows x cols (the whole matrix, a row, a 1x128 group, a 128x128 block): float64
    amax per tile, scale = amax / 448 rounded to float32 (1 for an all-zero tile), the float32 quotient rounded to
    e4m3. Returns (x_fp8, scales [ceil(M/rows), ceil(K/cols)] float32)."""
    m, k = x.shape
    gm, gk = _cdiv(m, rows), _cdiv(k, cols)
    xd = x.double()
    pad = torch.zeros((gm * rows, gk * cols), dtype=torch.float64, device=x.device)
    pad[:m, :k] = xd.abs()
    amax = pad.reshape(gm, rows, gk, cols).amax(dim=(1, 3))
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax)).float()
    expanded = scale.double().repeat_interleave(rows, 0).repeat_interleave(cols, 1)[:m, :k]
    return fp8_round((xd / expanded).float()), scale


def expand_scales(scale_a: torch.Tensor, scale_b: torch.Tensor, m: int, n: int, k: int, mode: str
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """The scales as float64 [M, K] and [N, K] multipliers of the operands."""
    sa, sb = scale_a.double(), scale_b.double()
    if mode == "tensor":
        return sa.reshape(1, 1).expand(m, k), sb.reshape(1, 1).expand(n, k)
    if mode == "row":
        return sa.reshape(m, 1).expand(m, k), sb.reshape(n, 1).expand(n, k)
    return (sa.repeat_interleave(BLOCK, 1)[:, :k],
            sb.repeat_interleave(BLOCK, 0).repeat_interleave(BLOCK, 1)[:n, :k])


def dequantized(inputs: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = inputs["a"], inputs["b"]
    m, k = a.shape
    n = b.shape[0]
    ea, eb = expand_scales(inputs["scale_a"], inputs["scale_b"], m, n, k, inputs_mode(inputs))
    return a.double() * ea, b.double() * eb


def inputs_mode(inputs: Inputs) -> str:
    from ridgeline.ops.scaled_mm.launch import scale_mode

    a, b = inputs["a"], inputs["b"]
    return scale_mode(inputs["scale_a"], inputs["scale_b"], a.shape[0], b.shape[0], a.shape[1])


def _gen(device: torch.device | str, seed: int) -> torch.Generator:
    return torch.Generator(device=torch.device(device)).manual_seed(seed)


class ScaledMMSpec(OpSpec):
    def __init__(self) -> None:
        super().__init__(
            name="scaled_mm",
            summary="FP8 e4m3 GEMM y = (a @ b^T) * scales (+ bias): per-tensor, per-row or 1x128/128x128 block",
            signature="fn(a, b, scale_a, scale_b, out_dtype, bias) -> y",
            outputs=("y",), batch_inputs=("a", "scale_a"), dtypes=(FP8,), dims=("M", "N", "K"),
            shape_sets={"sweep": SWEEP, "decode": DECODE, "models": MODELS, "edge": EDGE, "cpu": CPU},
            variants=VARIANTS,
        )

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        m, n, k = case.shape
        v = parse_variant(case.variant)
        gen = _gen(device, seed)
        x = torch.randn((m, k), generator=gen, device=device, dtype=torch.float32)
        w = torch.randn((n, k), generator=gen, device=device, dtype=torch.float32) * W_STD
        tiles = {"tensor": ((max(m, 1), max(k, 1)), (max(n, 1), max(k, 1))), "row": ((1, max(k, 1)),) * 2,
                 "block": ((1, BLOCK), (BLOCK, BLOCK))}[v["mode"]]
        a, sa = quantize_ref(x, *tiles[0])
        b, sb = quantize_ref(w, *tiles[1])
        want = {"tensor": ((), ()), "row": ((m, 1), (1, n)),
                "block": ((m, _cdiv(k, BLOCK)), (_cdiv(n, BLOCK), _cdiv(k, BLOCK)))}[v["mode"]]
        # (Empty operands have no amax: their scales are ones of the shape the mode takes.)
        sa = sa.reshape(want[0]) if sa.numel() == math.prod(want[0]) else torch.ones(want[0], device=device)
        sb = sb.reshape(want[1]) if sb.numel() == math.prod(want[1]) else torch.ones(want[1], device=device)
        if v["strided"]:
            wide = torch.empty((m, k + STRIDE_PAD), dtype=FP8, device=device)
            wide[:, :k] = a
            a = wide[:, :k]
        if v["nmajor"]:
            b = b.t().contiguous().t()
        bias = None
        if v["bias"]:
            bias = (torch.randn((n,), generator=gen, device=device) * 0.5).to(v["out_dtype"])
        return {"a": a, "b": b, "scale_a": sa, "scale_b": sb, "out_dtype": v["out_dtype"], "bias": bias}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        da, db = dequantized(inputs)
        y = da @ db.T
        if inputs["bias"] is not None:
            y = y + inputs["bias"].double()
        return (y,)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return (fn(inputs["a"], inputs["b"], inputs["scale_a"], inputs["scale_b"], inputs["out_dtype"],
                   inputs["bias"]),)

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        m, n, k = shape
        v = parse_variant(variant)
        scales = {"tensor": 2, "row": m + n, "block": (m + _cdiv(n, BLOCK)) * _cdiv(k, BLOCK)}[v["mode"]]
        out = v["out_dtype"].itemsize
        bias = n * out if v["bias"] else 0
        return Cost(bytes=m * k + n * k + 4 * scales + m * n * out + bias, flops=2 * m * n * k, unit="fp8")

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return Tolerance(atol=1e-2, rtol=OUT_EPS[torch.bfloat16] * 2)

    def tolerance_for(self, case: Case, output: str, dtype: torch.dtype) -> Tolerance:
        """y ~ N(0, K * W_STD^2): the output's rounding is relative (rtol: two half-ulps, for peers that round
        a dequantized operand too), the fp32 accumulation error grows with K (a K * 2^-22 share of y's spread,
        plus one ulp of the output at that spread for near-zero results). Hopper's FP8 tensor cores add their
        products with fewer bits than fp32 (~14, DeepSeek-V3 report 3.3.2) before a kernel promotes the partial
        into fp32: 2^-9 of the spread covers it (the H200 measured 2^-9.5 at K = 300 into an fp32 output)."""
        k = max(case.shape[2], 1)
        eps = OUT_EPS.get(dtype, OUT_EPS[torch.bfloat16])
        spread = math.sqrt(k) * W_STD
        return Tolerance(atol=spread * (k * 2.0**-22 + 2.0**-9 + 4 * eps), rtol=4 * eps)

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return inputs["out_dtype"]

    def rows(self, shape: Shape) -> int:
        return shape[0]

    def batch_subset(self, inputs: Inputs, index: slice) -> Inputs:
        """Rows of a and, in the row and block modes, of scale_a (one row of scales per row of a; also when K = 0
        leaves the block scales empty). A per-tensor scale is kept."""
        out = dict(inputs, a=inputs["a"][index])
        if inputs_mode(inputs) != "tensor":
            out["scale_a"] = inputs["scale_a"][index]
        return out

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype, mode) for s in EDGE for mode in MODES]
        cases += [Case((37, 45, 300), dtype, v) for v in ("row+bias", "block+fp16", "tensor+fp32", "row+strided",
                                                          "block+nmajor", "row+nmajor")]
        if torch.device(device).type == "cuda":
            cases += [Case((4096, 4096, 4096), dtype, mode) for mode in MODES]
            cases += [Case((1000, 3000, 4100), dtype, "block+bias"), Case((1, 28672, 4096), dtype, "row")]
        return cases

    def launch_info(self, case: Case, device) -> dict[str, Any] | None:
        from ridgeline.lib.launch import multiprocessor_count
        from ridgeline.ops.scaled_mm.launch_ws import ws_device

        dev = torch.device(device)
        return {"config": self.rule_config(case, multiprocessor_count(dev), ws_device(dev)).describe()}

    def rule_config(self, case: Case, sms: int, on_sm90: bool, interpreted: bool | None = None) -> Any:
        """The rules' tile for a case on the inputs this spec makes (K-contiguous rows unless N-major), on a GPU of
        `sms` SMs, sm_90 or not (where the Gluon kernel may take it)."""
        from ridgeline.ops.scaled_mm.launch_ws import ws_output
        from ridgeline.ops.scaled_mm.rules import config_for

        m, n, k = case.shape
        v = parse_variant(case.variant)
        tma = k % 16 == 0 and not v["nmajor"]
        ws = tma and on_sm90 and ws_output(v["out_dtype"], n)
        aligned = k % 16 == 0 and (n % 16 == 0 or not v["nmajor"])
        return config_for(m, n, k, v["mode"], sms, interpreted, tma=tma, aligned=aligned, ws=ws)


# --- the quantizers ------------------------------------------------------------------------------------------
EXACT = Tolerance(atol=0.0, rtol=0.0)
Q_SWEEP: list[Shape] = [(1, 4096), (16, 4096), (128, 4096), (1024, 4096), (4096, 4096), (16384, 4096),
                        (4096, 8192), (4096, 14336), (16384, 8192), (4096, 28672)]
Q_EDGE: list[Shape] = [(1, 1), (7, 33), (5, 129), (3, 300), (2, 4100), (2, 20000), (0, 128), (64, 256)]
Q_CPU: list[Shape] = [(4, 256), (16, 300), (33, 1024)]
Q_VARIANTS = ("", "strided", "zero-row")


def _quant_input(case: Case, device, seed: int) -> torch.Tensor:
    m, k = case.shape
    gen = _gen(device, seed)
    if "strided" in case.variant:
        x = torch.randn((m, k + 13), generator=gen, device=device).to(case.dtype)[:, :k]
    else:
        x = torch.randn((m, k), generator=gen, device=device).to(case.dtype)
    if "zero-row" in case.variant and m:
        x[m // 2] = 0  # the amax = 0 guard
    return x


class _QuantSpec(OpSpec):
    group_of_k: Callable[[int], int]

    def tolerance(self, dtype: torch.dtype, output: str) -> Tolerance:
        return EXACT

    def output_dtype(self, name: str, inputs: Inputs) -> torch.dtype:
        return FP8 if name == "x_fp8" else torch.float32

    def edge_cases(self, dtype: torch.dtype, device) -> list[Case]:
        cases = [Case(s, dtype) for s in Q_EDGE]
        cases += [Case((7, 300), dtype, "strided"), Case((9, 4100), dtype, "zero-row")]
        if torch.device(device).type == "cuda":
            cases += [Case((4096, 4096), dtype), Case((1024, 28672), dtype, "strided")]
        return cases


QUANT_FIELDS: dict[str, Any] = {
    "outputs": ("x_fp8", "scale"), "batch_inputs": ("x",), "dtypes": (torch.bfloat16, torch.float16, torch.float32),
    "dims": ("M", "K"), "shape_sets": {"sweep": Q_SWEEP, "edge": Q_EDGE, "cpu": Q_CPU}, "variants": Q_VARIANTS,
}


class QuantPerTokenSpec(_QuantSpec):
    def __init__(self) -> None:
        super().__init__(name="quantize_fp8_per_token",
                         summary="dynamic per-token e4m3 quantization: scale = amax(row) / 448, x_fp8 = sat(x / s)",
                         signature="fn(x) -> (x_fp8, scale [M, 1])", **QUANT_FIELDS)

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        return {"x": _quant_input(case, device, seed)}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        x = inputs["x"]
        q, s = quantize_ref(x, 1, max(x.shape[1], 1))
        return q.double(), s.double().reshape(x.shape[0], 1)

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return tuple(fn(inputs["x"]))

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        m, k = shape
        # Read x once, write x_fp8 and one scale a row; |x| and max, divide, clamp: 3 FLOPs an element.
        return Cost(bytes=m * k * (dtype.itemsize + 1) + 4 * m, flops=3 * m * k)


class QuantPerGroupSpec(_QuantSpec):
    def __init__(self) -> None:
        super().__init__(name="quantize_fp8_per_group",
                         summary="dynamic per-1x128-group e4m3 quantization (DeepSeek-V3 activations)",
                         signature="fn(x, group) -> (x_fp8, scale [M, ceil(K / group)])", **QUANT_FIELDS)

    def make_inputs(self, case: Case, device, seed: int) -> Inputs:
        return {"x": _quant_input(case, device, seed), "group": BLOCK}

    def reference(self, inputs: Inputs) -> tuple[torch.Tensor, ...]:
        q, s = quantize_ref(inputs["x"], 1, inputs["group"])
        return q.double(), s.double()

    def call(self, fn: Callable[..., Any], inputs: Inputs) -> tuple[torch.Tensor, ...]:
        return tuple(fn(inputs["x"], inputs["group"]))

    def cost(self, shape: Shape, dtype: torch.dtype, variant: str = "") -> Cost:
        m, k = shape
        return Cost(bytes=m * k * (dtype.itemsize + 1) + 4 * m * _cdiv(k, BLOCK), flops=3 * m * k)


register_spec(ScaledMMSpec())
register_spec(QuantPerTokenSpec())
register_spec(QuantPerGroupSpec())


def _ours_mm() -> Callable[..., Any]:
    from ridgeline.ops.scaled_mm.launch import scaled_mm

    return lambda a, b, scale_a, scale_b, out_dtype, bias: scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)


def _ours_token() -> Callable[..., Any]:
    from ridgeline.ops.scaled_mm.launch import quantize_fp8_per_token

    return quantize_fp8_per_token


def _ours_group() -> Callable[..., Any]:
    from ridgeline.ops.scaled_mm.launch import quantize_fp8_per_group

    return quantize_fp8_per_group


register_impl("scaled_mm", "ridgeline", "ours", _ours_mm, description="ridgeline Triton kernel (wgmma, TMA)")
register_impl("quantize_fp8_per_token", "ridgeline", "ours", _ours_token, description="ridgeline Triton kernel")
register_impl("quantize_fp8_per_group", "ridgeline", "ours", _ours_group, description="ridgeline Triton kernel")
