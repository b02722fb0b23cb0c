"""A user's op and kernels from their own file (profile_toy_op.py), profiled on the CPU: the kernels are found from
their launches (no table, no hook), and compiled ahead of time for sm_90 in a clean child process that imports
the same file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

import ridgeline.profile as P
from ridgeline.report.cli import profile_command

TOY = Path(__file__).resolve().parent / "profile_toy_op.py"
SPEC, PLAIN, TUNED = f"{TOY}:ScaleAdd", f"{TOY}:scale_add", f"{TOY}:scale_add_tuned"
HAS_PTXAS = P.tool_path("ptxas") is not None and P.tool_path("cuobjdump") is not None
needs_tools = pytest.mark.skipif(not HAS_PTXAS, reason="Triton's bundled ptxas/cuobjdump not found: no AOT compile")


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("profile")(profile_command)
    app.command("noop")(lambda: None)
    return app


def test_capture_finds_a_user_kernel_from_its_launch():
    call = P.capture_call(SPEC, PLAIN, (8, 256), torch.float32)
    assert call.inputs == "cpu"  # no profile hook: real CPU inputs
    (launch,) = call.launches
    assert launch.name == "_scale_add_kernel" and launch.grid == 2 and launch.num_warps == 4
    assert launch.args["BLOCK"] == 1024 and launch.args["n"] == 2048 and launch.args["alpha"] == 0.5
    assert launch.args["X"] == P.TensorArg(torch.float32, True) and launch.config == "BLOCK=1024 warps=4"
    sig, consts, attrs = P.specialization(P.as_jit(launch.kernel), launch.args)
    assert sig["X"] == "*fp32" and sig["alpha"] == "fp32" and sig["n"] == "i32" and consts == {"BLOCK": 1024}
    assert (3,) in attrs  # n = 2048 is divisible by 16


def test_capture_of_an_autotuned_kernel_takes_a_config_without_benchmarking():
    """Autotune (2 configs) over heuristics over jit: recorded without running, the first config is taken (nothing
    can be benchmarked on a CPU) and the heuristics see it, as they would the tuned one."""
    (launch,) = P.capture_launches(SPEC, TUNED, (8, 200), torch.float16)
    assert launch.name == "_scale_add_tuned_kernel" and launch.num_warps == 2 and launch.num_stages == 3
    assert launch.args["BLOCK"] == 256 and launch.args["EVEN"] is False  # 1600 elements: not a multiple of 256
    assert launch.grid == 7 and "first of 2 autotune configs" in launch.describe()["autotune"]


def test_run_mode_runs_the_kernel_and_records_it():
    from ridgeline.core.registry import resolve

    fn = resolve(SPEC, PLAIN).fn
    x = torch.randn(4, 300)
    with P.LaunchCapture(run=True) as cap:
        y = fn(x, 2.0)
    assert torch.allclose(y, x * 2 + 1) and [la.name for la in cap.launches] == ["_scale_add_kernel"]
    with P.LaunchCapture(run=False) as cap:  # recorded only: nothing ran
        fn(x, 2.0)
    assert len(cap.launches) == 1 and cap.launches[0].compiled is None


def test_run_mode_does_not_record_the_autotuner_benchmark(monkeypatch):
    from ridgeline.core.registry import resolve

    fn = resolve(SPEC, TUNED).fn
    tuner = fn.__globals__["_scale_add_tuned_kernel"]
    timings = iter([2.0, 1.0])  # the second config wins

    def fake_bench(kernel_call, quantiles):
        kernel_call()
        t = next(timings)
        return [t, t, t]

    tuner.__dict__.pop("do_bench", None)
    monkeypatch.setattr(tuner, "_do_bench", fake_bench)
    monkeypatch.setattr(tuner, "cache", {})
    try:
        x = torch.randn(3, 1000)
        with P.LaunchCapture(run=True) as cap:
            y = fn(x, 0.5)
    finally:
        tuner.__dict__.pop("do_bench", None)
    assert torch.allclose(y, x * 0.5 + 1)
    (launch,) = cap.launches  # the two benchmark launches are not recorded, the tuned one is
    assert launch.args["BLOCK"] == 512 and launch.num_warps == 4 and "best of 2" in launch.note


def test_a_torch_implementation_of_a_user_op_launches_no_triton_kernel():
    with pytest.raises(ValueError, match="launched no triton.jit kernel"):
        P.capture_launches(SPEC, f"{TOY}:scale_add_torch", (4, 64), torch.float32)


@needs_tools
def test_profile_command_on_a_user_op(tmp_path):
    """Registers, spills, occupancy and SASS of the user's kernel, compiled ahead of time for sm_90."""
    loose = tmp_path / "toy.json"
    res = CliRunner().invoke(_app(), ["profile", SPEC, "--impl", PLAIN, "--shape", "64x1024", "--dtype", "fp32",
                                      "-o", str(tmp_path / "p"), "--json", str(loose), "--no-kineto"])
    assert res.exit_code == 0, res.output
    assert "_scale_add_kernel" in res.output and "not collected:" in res.output
    prof = json.loads(loose.read_text())
    assert prof["op"] == "toy_scale_add" and prof["source"] == "user" and prof["schema"] == P.PROFILE_SCHEMA
    (k,) = prof["kernels"]
    assert k["name"] == "_scale_add_kernel" and k["source"] == "aot" and k["target"] == "cuda:90"
    assert k["registers"] > 0 and k["spill_stores_bytes"] == 0 and k["spill_loads_bytes"] == 0
    assert k["num_warps"] == 4 and k["constexprs"] == {"BLOCK": 1024} and k["launches"] == 1
    assert 0 < k["occupancy"]["occupancy"] <= 1 and k["occupancy"]["limited_by"]
    assert k["sass"]["global_loads"].get("128", 0) > 0 and k["sass"]["global_stores"].get("128", 0) > 0
    assert k["sass"]["tensor_cores"] == "none" and k["sass"]["local_loads"] == 0
    assert (tmp_path / "p" / k["files"]["sass"]).is_file()
    assert prof["launch"]["grid"] == 64 and prof["launch"]["block_threads"] == 128
    assert any("CPU inputs" in n for n in prof["notes"])


@needs_tools
def test_profile_of_an_autotuned_user_kernel(tmp_path):
    prof = P.profile(SPEC, TUNED, (64, 1024), "fp32", out_dir=tmp_path, kineto=False)
    (k,) = prof["kernels"]
    assert k["name"] == "_scale_add_tuned_kernel" and k["num_warps"] == 2 and k["registers"] > 0
    assert k["constexprs"] == {"BLOCK": 256, "EVEN": True}
    assert "first of 2" in prof["launch"]["autotune"]


@pytest.mark.parametrize("argv, message", [
    (["nope_op", "--impl", "x", "--shape", "8x64"], "unknown op"),
    ([SPEC, "--impl", PLAIN, "--shape", "8xz"], "shape"),
    ([SPEC, "--impl", PLAIN, "--shape", "64"], "rank"),
    ([SPEC, "--impl", PLAIN, "--shape", "8x64", "--dtype", "int4"], "dtype"),
    ([SPEC, "--impl", PLAIN, "--shape", "8x64", "--dtype", "bf16"], "takes fp32, fp16"),
    ([SPEC, "--impl", f"{TOY}:no_such_fn", "--shape", "8x64", "--dtype", "fp32"], "defines no 'no_such_fn'"),
    (["/nonexistent/op.py:Spec", "--impl", PLAIN, "--shape", "8x64"], "no such file"),
    ([SPEC, "--impl", PLAIN, "--shape", "8x64", "--dtype", "fp32", "--variant", "zigzag"], "variant"),
])
def test_profile_command_bad_input_is_one_line(tmp_path, argv, message):
    res = CliRunner().invoke(_app(), ["profile", *argv, "-o", str(tmp_path / "p")])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())  # (rich wraps the one message at the terminal's width)
    assert message in text and "Traceback" not in text and text.count("error:") == 1, res.output
    assert text.startswith("error:"), res.output


def test_recorded_launches_travel_to_a_child_as_json():
    (launch,) = P.capture_launches(SPEC, TUNED, (8, 256), torch.float16)
    data = P.launch_to_json(launch)
    assert data["qualname"] == "_scale_add_tuned_kernel" and data["file"] == str(TOY)
    back = P.launch_from_json(json.loads(json.dumps(data)))
    assert back.args == launch.args and back.num_warps == 2 and back.config == launch.config
    assert P.specialization(P.as_jit(back.kernel), back.args) == P.specialization(P.as_jit(launch.kernel),
                                                                                  launch.args)

    def inner_kernel():  # a kernel defined inside a function cannot be found by name there
        pass

    assert P.launch_to_json(P.TritonLaunch(type("K", (), {"fn": inner_kernel})(), {}, 4, 1, "")) is None


@needs_tools
def test_profile_of_a_triton_peer_registered_at_runtime(tmp_path):
    """A peer registered in this process only (no op package defines it): its recorded launch, not its name, goes
    to the child that compiles it."""
    from ridgeline.core.registry import get_spec, register_impl
    from ridgeline.core.userfile import load_object

    get_spec(SPEC)
    register_impl("toy_scale_add", "toy-triton-peer", "peer", lambda: load_object(PLAIN, "impl")[0])
    prof = P.profile(SPEC, "toy-triton-peer", (16, 1024), "fp16", out_dir=tmp_path, kineto=False)
    assert prof["source"] == "peer" and (tmp_path / "launches.json").is_file()
    (k,) = prof["kernels"]
    assert k["name"] == "_scale_add_kernel" and k["source"] == "aot" and k["registers"] > 0
    assert not any(n for n in prof["notes"] if "launches no Triton kernel" in n)
