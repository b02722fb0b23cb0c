"""Capturing the launches a call makes (generic: from JITFunction.run), and their specialization."""

from __future__ import annotations

import os

import pytest

import ridgeline.profile as P


# --- the launches our wrappers make, and their specialization ----------------------------------------------
def test_capture_launch_records_what_the_library_passes():
    import torch

    (one,) = P.capture_launches("rmsnorm", "ridgeline", (1, 4096), torch.bfloat16, sm_count=132)
    kernel = P.as_jit(one.kernel)
    names = [p.name for p in kernel.params]
    assert set(one.args) == set(names) and one.grid == 1 and one.num_warps >= 1
    assert all(isinstance(one.args[n], P.TensorArg) for n in ("X", "Y", "W"))
    sig, consts, attrs = P.specialization(kernel, one.args)
    assert consts["BLOCK_N"] == 2048 and consts["HAS_RESIDUAL"] is False  # (4096 columns: two chunks of 2048)
    assert sig["X"] == "*bf16" and (names.index("X"),) in attrs  # torch allocations are 16-byte aligned
    assert consts.get("M") == 1 or sig.get("M") == "constexpr"  # an int equal to 1 is a constant
    (wide,) = P.capture_launches("rmsnorm", "ridgeline", (65536, 4096), torch.bfloat16, sm_count=132)
    assert wide.grid > 132  # the grid a CUDA device gets, not the interpreter's
    (odd,) = P.capture_launches("fused_add_rmsnorm", "ridgeline", (4096, 4100), torch.bfloat16, "strided")
    _, consts, _ = P.specialization(kernel, odd.args)
    assert consts["HAS_RESIDUAL"] is True and consts["X_ALIGN"] == 1  # rows 4113 elements apart: no alignment
    assert odd.config  # the wrapper's own description of its launch configuration
    with pytest.raises(ValueError, match="launched no triton.jit kernel: not a Triton kernel"):
        P.capture_launches("rmsnorm", "torch-eager", (4, 64), torch.bfloat16)


def test_capture_of_a_split_row():
    """Rows wider than 32768 columns are split across programs (a cooperative launch): captured on the meta
    device (as a GPU would launch it, even under the interpreter), the launch carries the split kernel, its
    option and a grid of whole groups. (scripts/compile_configs.py --check-layouts compiles it for sm_90.)"""
    import torch

    for op in ("rmsnorm", "fused_add_rmsnorm"):
        (launch,) = P.capture_launches(op, "ridgeline", (2048, 65536), torch.bfloat16, sm_count=132)
        assert P.as_jit(launch.kernel).__name__ == "_rms_norm_split_kernel"
        assert launch.options.get("launch_cooperative_grid") is True
        assert launch.config.startswith("split 8x8192") and launch.grid % 8 == 0 and 132 <= launch.grid <= 2048 * 8
        assert launch.args["EMULATE_RNE"] is False and launch.args["SPLIT"] == 8


def test_capture_describes_the_config_for_the_weights_dtype():
    """An fp32 weight with bf16 x changes the launch (the weight loaded after the reduction beyond two rows per
    SM, uncapped registers): the description must be the config the wrapper launched, not the bf16 one."""
    import torch

    from ridgeline.core.registry import get_spec
    from ridgeline.ops.rmsnorm import profile as hook
    from ridgeline.ops.rmsnorm.rules import config_for

    for rows in (1, 4096):
        (launch,) = P.capture_launches("rmsnorm", "ridgeline", (rows, 8192), torch.bfloat16, "w-fp32")
        with hook.gpu_rules(get_spec("rmsnorm"), 132):
            cfg = config_for(8192, torch.bfloat16, rows, weight_dtype=torch.float32)
        assert launch.config == cfg.describe() and launch.args["WEIGHT_FIRST"] is cfg.weight_first
        assert launch.options.get("maxnreg") is None  # (the bf16 weight's config caps at 32 registers)


def test_capture_leaves_triton_and_the_modules_as_they_were(monkeypatch):
    import sys

    import torch
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    monkeypatch.delenv("RIDGELINE_FAST_LAUNCH", raising=False)
    mods = {n: m for n, m in sys.modules.items() if n.startswith("ridgeline.ops.rmsnorm.")}
    before = {n: dict(vars(m)) for n, m in mods.items()}
    entry = [vars(c)[a] for c, a in ((JITFunction, "run"), (InterpretedFunction, "run"), (Autotuner, "run"),
                                     (Autotuner, "_bench"))]
    P.capture_launches("fused_add_rmsnorm", "ridgeline-inplace", (8, 64), torch.float16)
    assert all(vars(mods[n])[k] is v for n, d in before.items() for k, v in d.items())
    assert entry == [vars(c)[a] for c, a in ((JITFunction, "run"), (InterpretedFunction, "run"),
                                             (Autotuner, "run"), (Autotuner, "_bench"))]
    assert "RIDGELINE_FAST_LAUNCH" not in os.environ


def test_capture_sets_fast_launch_off_meanwhile(monkeypatch):
    """ridgeline's CachedLauncher would launch a cached kernel past JITFunction.run: off while capturing."""
    monkeypatch.setenv("RIDGELINE_FAST_LAUNCH", "1")
    with P.LaunchCapture() as cap:
        assert os.environ["RIDGELINE_FAST_LAUNCH"] == "0"
    assert os.environ["RIDGELINE_FAST_LAUNCH"] == "1" and cap.launches == []


def test_hooks_are_found_from_the_specs_package():
    from ridgeline.core.registry import get_spec
    from ridgeline.ops.rmsnorm import profile as hook

    assert P.hooks_for(get_spec("rmsnorm")) is hook and P.hooks_for(get_spec("rmsnorm_fp8")) is hook
    spec = get_spec("rmsnorm")
    own = object()
    try:
        spec.profile_hooks = own  # an attribute on the spec wins (a user's spec in a file)
        assert P.hooks_for(spec) is own
    finally:
        del spec.profile_hooks


def test_specialization_rules():
    import torch

    (one,) = P.capture_launches("rmsnorm", "ridgeline", (7, 64), torch.float32)
    kernel = P.as_jit(one.kernel)
    args = dict(one.args)
    ints = [p.name for p in kernel.params if not p.is_constexpr and isinstance(args[p.name], int)]
    args[ints[0]], args[ints[1]] = 1, 48
    sig, consts, attrs = P.specialization(kernel, args)
    names = [p.name for p in kernel.params]
    assert sig[ints[0]] == "constexpr" and consts[ints[0]] == 1
    assert sig[ints[1]] == "i32" and (names.index(ints[1]),) in attrs
    args[ints[1]] = 2**40 + 3
    assert P.specialization(kernel, args)[0][ints[1]] == "i64"
    tensor = next(n for n in names if isinstance(args[n], P.TensorArg))
    args[tensor] = P.TensorArg(torch.float32, aligned=False)
    assert (names.index(tensor),) not in P.specialization(kernel, args)[2]
    with pytest.raises(ValueError, match="launch gives"):
        P.specialization(kernel, {**one.args, "EXTRA": 1})


