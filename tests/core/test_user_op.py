"""The contract test: an op ridgeline does not ship, defined in a user's own file, driven end to end on the CPU
through check, bench (and its resume), report and compare, from the CLI and from Python. It is what keeps
"adding an op touches no core file" true. The profile leg is in tests/profile/."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

import ridgeline
from ridgeline.cli import app
from ridgeline.core import registry

runner = CliRunner()

# A toy op of ~30 lines: out = x * alpha + shift along rows, with a Triton kernel and a torch implementation.
TOY = '''
import torch, triton, triton.language as tl
from ridgeline import Case, Cost, OpSpec, Tolerance

class ScaleShift(OpSpec):
    def make_inputs(self, case, device, seed):
        g = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(case.shape, generator=g, device=device).to(case.dtype)
        return {"x": x, "alpha": 1.5 + float(seed % 7), "shift": -0.25}
    def reference(self, inputs):
        return (inputs["x"].double() * inputs["alpha"] + inputs["shift"],)
    def call(self, fn, inputs):
        return (fn(inputs["x"], inputs["alpha"], inputs["shift"]),)
    def cost(self, shape, dtype, variant=""):
        n = shape[0] * shape[1]
        return Cost(bytes=2 * n * dtype.itemsize, flops=2 * n)
    def tolerance(self, dtype, output):
        return Tolerance(atol=1e-6, rtol=1e-6) if dtype == torch.float32 else Tolerance(atol=1e-2, rtol=1e-2)

SPEC = ScaleShift(name="scale_shift", summary="out = x * alpha + shift", signature="fn(x, alpha, shift) -> out",
                  outputs=("out",), batch_inputs=("x",), dtypes=(torch.float32, torch.float16), dims=("M", "N"),
                  shape_sets={"tiny": [(4, 64), (3, 100)], "edge": [(1, 1), (5, 37), (0, 8)]})

@triton.jit
def _kernel(X, Y, n, alpha, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(X + offs, mask=offs < n).to(tl.float32)
    tl.store(Y + offs, (x * alpha + shift).to(Y.dtype.element_ty), mask=offs < n)

def triton_impl(x, alpha, shift):
    y = torch.empty_like(x)
    if x.numel():
        _kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), alpha, shift, BLOCK=256)
    return y

def torch_impl(x, alpha, shift):
    return (x.float() * alpha + shift).to(x.dtype)

def wrong_impl(x, alpha, shift):
    return (x.float() * alpha).to(x.dtype)
'''


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "toy_op.py"
    path.write_text(TOY)
    return path


def test_check_from_cli_passes_right_and_fails_wrong(toy):
    spec = f"{toy}:SPEC"
    r = runner.invoke(app, ["check", spec, "--impl", f"{toy}:triton_impl", "--impl", f"{toy}:torch_impl",
                            "--impl", f"{toy}:wrong_impl", "--dtype", "fp32"], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output  # the wrong one fails, so the command does
    assert "7 passed, 2 failed" in r.output  # wrong_impl is right on the empty case (0, 8)
    assert "max error" in r.output


def test_bench_resume_report_compare_from_cli(toy, tmp_path):
    spec, run1, run2 = f"{toy}:SPEC", tmp_path / "a.json", tmp_path / "b.json"
    args = ["bench", spec, "--impl", f"{toy}:triton_impl", "--impl", f"{toy}:torch_impl", "--shapes", "tiny",
            "--dtype", "fp32", "--budget", "0.02"]
    r = runner.invoke(app, [*args, "--json", str(run1)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    d = json.loads(run1.read_text())
    assert d["settings"]["op"] == "scale_shift" and d["settings"]["spec_file"] == f"{toy.resolve()}:SPEC"
    assert len(d["measurements"]) == 4 and {m["op"] for m in d["measurements"]} == {"scale_shift"}
    assert all(m["bytes"] == 2 * 4 * m["shape"][0] * m["shape"][1] for m in d["measurements"])

    # A killed run: drop the last two measurements and mark it partial; --resume redoes exactly those.
    kept = d["measurements"][:2]
    d["measurements"], d["complete"] = kept, False
    run2.write_text(json.dumps(d))
    r = runner.invoke(app, ["bench", "--resume", str(run2)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    resumed = json.loads(run2.read_text())
    assert resumed["complete"] and len(resumed["measurements"]) == 4
    assert resumed["measurements"][:2] == kept

    r = runner.invoke(app, ["report", str(run1), "-o", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    assert "scale_shift" in (tmp_path / "rep" / "report.md").read_text()
    r = runner.invoke(app, ["compare", str(run1), str(run2)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "over 4 matched cases" in r.output


def test_python_api_takes_the_file_ref_and_the_spec_object(toy):
    results = ridgeline.check(f"{toy}:SPEC", [f"{toy}:triton_impl"], [torch.float16])
    assert [r.passed for r in results] == [True, True, True]
    spec = registry.get_spec(f"{toy}:SPEC")
    results = ridgeline.check(spec, [f"{toy}:torch_impl"], cases=[ridgeline.Case((2, 9), torch.float32)])
    assert results and results[0].passed
    record = ridgeline.bench(spec, [f"{toy}:torch_impl"], shapes=[(2, 8)], dtypes=[torch.float32], budget_s=0.01)
    assert record.complete and record.measurements[0]["op"] == "scale_shift"


BROKEN = {
    "syntax.py": ("def f(:\n", "SyntaxError at line 1"),
    "imports.py": ("import no_such_module_xyz\n", "import failed: ModuleNotFoundError"),
    "raises.py": ("x = 1\nraise RuntimeError('boom')\n", "RuntimeError: boom (line 2)"),
    "notspec.py": ("SPEC = 42\n", "SPEC is of type int, not an OpSpec"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_user_file_gets_one_line(tmp_path, name):
    text, expected = BROKEN[name]
    (tmp_path / name).write_text(text)
    for command in (["check", f"{tmp_path / name}:SPEC"], ["bench", f"{tmp_path / name}:SPEC"]):
        r = runner.invoke(app, command, env={"COLUMNS": "300"})
        assert r.exit_code == 2, r.output
        assert expected in r.output and str(tmp_path / name) in r.output
        assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_user_impl_errors_name_the_file_and_problem(toy, tmp_path):
    (tmp_path / "sig.py").write_text("def two(x, alpha):\n    return x\n")
    cases = [
        (f"{tmp_path / 'sig.py'}:two", "cannot be called as fn(x, alpha, shift)"),
        (f"{toy}:nope", "defines no 'nope'"),
        (f"{tmp_path / 'missing.py'}:f", "no such file"),
        (f"{toy}:ScaleShift", "not a function"),
    ]
    for ref, expected in cases:
        r = runner.invoke(app, ["check", f"{toy}:SPEC", "--impl", ref], env={"COLUMNS": "300"})
        assert r.exit_code == 2 and expected in r.output and "Traceback" not in r.output, r.output


def test_user_op_shapes_and_dtypes_are_validated(toy):
    r = runner.invoke(app, ["bench", f"{toy}:SPEC", "--impl", f"{toy}:torch_impl", "--shapes", "64"])
    assert r.exit_code == 2 and "rank 2 (MxN)" in r.output, r.output
    r = runner.invoke(app, ["bench", f"{toy}:SPEC", "--impl", f"{toy}:torch_impl", "--dtype", "bf16"])
    assert r.exit_code == 2 and "scale_shift takes fp32, fp16" in r.output, r.output
    r = runner.invoke(app, ["check", f"{toy}:SPEC"])  # no implementation of ours: say so
    assert r.exit_code == 2 and "--impl" in r.output, r.output


def test_ops_lists_a_user_op(toy):
    r = runner.invoke(app, ["ops", f"{toy}:SPEC"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "scale_shift" in r.output and "rmsnorm" in r.output, r.output
