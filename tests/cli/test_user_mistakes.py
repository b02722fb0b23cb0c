"""Every user mistake gets one clear line (exit 2, no traceback), and the CPU path says what it will do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from ridgeline.cli import app
from ridgeline.cli.render import failures_table
from ridgeline.core import registry
from ridgeline.core.spec import Case, Impl
from ridgeline.harness.correctness import check_case, same_output
from ridgeline.harness.timing import _adaptive

runner = CliRunner()
WIDE = {"COLUMNS": "300"}


def one_line_error(r, *expected: str) -> None:
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1, r.output
    for text in expected:
        assert text in r.output, r.output


def test_output_folder_is_checked_before_any_work(tmp_path):
    missing = tmp_path / "no" / "such" / "x.json"
    r = runner.invoke(app, ["check", "rmsnorm", "--json", str(missing)], env=WIDE)
    one_line_error(r, "--json", "does not exist")
    one_line_error(runner.invoke(app, ["bench", "rmsnorm", "--json", str(missing)], env=WIDE), "--json")
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("doc, expected", [
    ([1, 2], "expected a JSON object, got a list"),
    ({"schema": "ridgeline.run/1", "kind": "bench"}, "'command' is missing"),
    ({"hello": 1}, "expected schema"),
])
def test_report_and_compare_refuse_what_is_not_a_run_record(tmp_path, doc, expected):
    path = tmp_path / "x.json"
    path.write_text(json.dumps(doc))
    one_line_error(runner.invoke(app, ["report", str(path), "-o", str(tmp_path / "r")], env=WIDE), expected)
    one_line_error(runner.invoke(app, ["compare", str(path), str(path)], env=WIDE), expected)


def _bench_record(tmp_path, shape: str):
    out = tmp_path / f"{shape}.json"
    r = runner.invoke(app, ["bench", "rmsnorm", "--impl", "torch-F", "--shapes", shape, "--dtype", "fp32",
                            "--budget", "0.01", "--json", str(out)], env=WIDE)
    assert r.exit_code == 0, r.output
    return out


def test_bad_measurements_field_and_compare_without_common_cases(tmp_path):
    a, b = _bench_record(tmp_path, "2x64"), _bench_record(tmp_path, "3x64")
    one_line_error(runner.invoke(app, ["compare", str(a), str(b)], env=WIDE), "no measurement in common")
    d = json.loads(a.read_text())
    d["measurements"] = "x"
    a.write_text(json.dumps(d))
    one_line_error(runner.invoke(app, ["report", str(a), "-o", str(tmp_path / "r")], env=WIDE),
                   "'measurements' must be a list")


@pytest.mark.parametrize("args, expected", [
    (["--budget", "0"], "--budget: expected seconds > 0"),
    (["--budget", "-1"], "--budget"),
    (["--time-limit", "0"], "--time-limit: expected seconds > 0"),
    (["--shapes", ","], "no shapes"),
    (["--shapes", "4096"], "rmsnorm takes shapes of rank 2 or 3 (MxN); got '4096'"),
    (["--dtype", "fp8e4m3"], "rmsnorm takes bf16, fp16, fp32; got fp8e4m3"),
    (["--dtype", "int7"], "dtype: expected one of"),
    (["--impl", "nope"], "no implementation 'nope'"),
    (["--regime", "warm"], "regime"),
])
def test_bench_refuses_bad_plans(args, expected):
    one_line_error(runner.invoke(app, ["bench", "rmsnorm", *args], env=WIDE), expected)


def test_check_refuses_bad_shapes_and_dtypes():
    one_line_error(runner.invoke(app, ["check", "rmsnorm", "--shapes", "4096"], env=WIDE), "rank 2 or 3")
    one_line_error(runner.invoke(app, ["check", "rmsnorm", "--dtype", "fp8e4m3"], env=WIDE), "rmsnorm takes")
    one_line_error(runner.invoke(app, ["check", "rmsnorm", "--shapes", ","], env=WIDE), "no shapes")


def test_resume_of_a_file_that_is_not_a_bench_record(tmp_path):
    path = tmp_path / "r.json"
    path.write_text("not json")
    one_line_error(runner.invoke(app, ["bench", "--resume", str(path)], env=WIDE), "not valid JSON")


def test_an_empty_row_is_not_blamed_on_the_implementation():
    spec = registry.get_spec("rmsnorm")
    r = check_case(spec, registry.resolve("rmsnorm", "torch-eager"), Case((5, 0), torch.float32), "cpu")
    assert r.passed, r.reasons


def test_none_or_wrong_arity_outputs_get_a_clear_reason():
    spec = registry.get_spec("rmsnorm")
    for fn, expected in ((lambda x, w, eps: None, "output out is NoneType, not a tensor"),
                         (lambda x, w, eps: (x, x), "output out is tuple, not a tensor")):
        r = check_case(spec, Impl("rmsnorm", "bad", "user", fn), Case((3, 8), torch.float32), "cpu")
        assert not r.passed and any(expected in reason for reason in r.reasons), r.reasons
        assert not any("AttributeError" in reason for reason in r.reasons), r.reasons


def test_nan_payloads_do_not_count_as_a_difference():
    a = torch.tensor([1.0, float("nan")], dtype=torch.bfloat16)
    b = a.clone()
    b.view(torch.int16)[1] = -1  # 0xffff: another NaN
    assert b[1].isnan() and same_output(a, b)
    assert not same_output(a, torch.tensor([1.0, 2.0], dtype=torch.bfloat16))
    assert not same_output(torch.tensor([0.0]), torch.tensor([-0.0]))


def test_identical_failures_are_grouped_with_a_count():
    fails = [{"impl": "x", "shape": [i, 8], "dtype": "fp32", "stage": "check", "regime": "", "reason": "same"}
             for i in range(1, 23)]
    table = failures_table({"failures": fails})
    assert table.row_count == 1
    assert "(22 cases)" in list(table.columns[1].cells)[0]


def test_a_wide_spread_is_not_stable():
    rounds = iter([[100.0, 50.0, 150.0, 100.0]] * 10)
    t = _adaptive("cpu", lambda: next(rounds), budget_s=0.0, min_samples=4)
    assert not t.stable and t.iqr_us > 0.2 * t.median_us


def test_a_long_cpu_plan_is_refused_with_what_fits(monkeypatch):
    import ridgeline.cli as cli

    monkeypatch.setattr(cli, "CPU_PLAN_LIMIT_S", 0.0)
    if torch.cuda.is_available():
        pytest.skip("the CPU path")
    one_line_error_lines = runner.invoke(app, ["bench", "rmsnorm", "--impl", "torch-F", "--shapes", "64x4096",
                                               "--regime", "graph-cold"], env=WIDE)
    assert one_line_error_lines.exit_code == 2
    assert "would take about" in one_line_error_lines.output and "--shapes cpu" in one_line_error_lines.output
    assert "become the one regime 'cpu'" in one_line_error_lines.output


def test_a_logged_bench_prints_a_line_per_measurement():
    r = runner.invoke(app, ["bench", "rmsnorm", "--impl", "torch-F", "--impl", "torch-eager", "--shapes",
                            "2x64,3x64", "--dtype", "fp32", "--budget", "0.01"], env=WIDE)
    assert r.exit_code == 0, r.output
    assert sum(line.startswith("measured ") for line in r.output.splitlines()) == 4


def test_version_and_module_entry():
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("ridgeline ")
    out = subprocess.run([sys.executable, "-m", "ridgeline", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("ridgeline "), out.stderr


def test_recorded_command_has_no_machine_path():
    from ridgeline.records.env import command_line

    assert command_line(["/home/u/.venv/bin/ridgeline", "bench", "rmsnorm", "--shapes", "1x8"]) == \
        "ridgeline bench rmsnorm --shapes 1x8"
    assert command_line(["/x/ridgeline/__main__.py", "ops"]) == "python -m ridgeline ops"
    # The device plans' shim runs `python -c "from ridgeline.cli import main; main()"`: argv[0] is "-c".
    assert command_line(["-c", "bench", "softmax", "--shapes", "sweep"]) == "ridgeline bench softmax --shapes sweep"
    # ridgeline.bench(...) from `python -c "..."`: sys.argv is ["-c"]; a bare `ridgeline` would reproduce nothing.
    assert command_line(["-c"]) == "-c"


def test_a_report_of_an_old_record_reproduces_with_a_retypeable_command(tmp_path):
    from ridgeline.records.record import load_record
    from ridgeline.report.build import write_report
    from ridgeline.report.data import retypeable

    assert retypeable("-c bench scaled_mm --variant row") == "ridgeline bench scaled_mm --variant row"
    assert retypeable("ridgeline ops") == "ridgeline ops" and retypeable(None) == ""
    results = Path(__file__).resolve().parents[2] / "docs" / "results"
    record = load_record(results / "h200-bench-rotary_embedding-sweep.json")  # written as "-c bench ..."
    assert record.command.startswith("-c bench")
    write_report(record, tmp_path, fmt="md")
    md = (tmp_path / "report.md").read_text()
    assert "```sh\nridgeline bench rotary_embedding" in md and "\n-c bench" not in md


def test_vram_tables_are_not_cut_in_a_pipe():
    r = runner.invoke(app, ["vram", "Llama-3.1-8B", "--gpu", "H200"])
    assert r.exit_code == 0, r.output
    assert "…" not in r.output, r.output


def test_help_lists_the_kernels_and_real_signatures():
    import inspect

    import ridgeline

    doc = ridgeline.__doc__
    assert "rms_norm" in doc and "fused_add_rms_norm" in doc and "OpSpec" in doc
    assert "rms_norm" in dir(ridgeline)
    # __all__ names every op package's public kernels, and only those that exist
    assert sorted(ridgeline.KERNELS) == sorted(ridgeline._exports())
    assert all(callable(getattr(ridgeline, name)) for name in ridgeline.__all__ if name != "__version__")
    assert list(inspect.signature(ridgeline.check).parameters)[:3] == ["op", "impls", "dtypes"]
    assert "shapes" in inspect.signature(ridgeline.bench).parameters


def test_interpreter_notices_are_silenced_for_the_cli():
    code = ("import logging, warnings, ridgeline.cli; "
            "print(logging.getLogger('torch.utils.cpp_extension').level == logging.ERROR, "
            "any(f[0] == 'ignore' and f[2] is RuntimeWarning and f[3] is not None "
            "and f[3].pattern.startswith('triton') for f in warnings.filters))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "True"], out.stderr


def test_a_meta_tensor_is_one_line_not_a_crash_in_the_interpreter():
    """Shapes-only tensors have no data: the kernels refuse them by name (they once failed deep in Triton)."""
    import ridgeline

    x = torch.empty(4, 64, device="meta")
    with pytest.raises(ValueError, match=r"^x is on the meta device: it has shapes but no data"):
        ridgeline.rms_norm(x, torch.empty(64, device="meta"))
    with pytest.raises(ValueError, match=r"^logits is on the meta device"):
        ridgeline.cross_entropy(x, torch.empty(4, dtype=torch.int64, device="meta"))
