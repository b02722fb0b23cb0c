"""The `ridgeline` command as a user runs it (CliRunner), on the CPU."""

import importlib.util
import json

import pytest
import torch
from typer.testing import CliRunner

from ridgeline.cli import app

runner = CliRunner()


def test_help_lists_commands():
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    for cmd in ("ops", "check", "bench", "probe", "runs"):
        assert cmd in r.output


def test_ops_lists_implementations_and_reasons():
    r = runner.invoke(app, ["ops"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert "fused_add_rmsnorm" in r.output and "ridgeline-inplace" in r.output
    if importlib.util.find_spec("liger_kernel") is None:
        assert "liger-kernel not installed" in r.output


def test_check_passes_and_fails_with_exit_codes(tmp_path):
    r = runner.invoke(app, ["check", "rmsnorm", "--dtype", "fp16", "--shapes", "7x769,3x4100"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "2 passed, 0 failed" in r.output
    bad = tmp_path / "bad.py"
    bad.write_text("def f(x, weight, eps):\n    return x * weight\n")
    out = tmp_path / "check.json"
    r = runner.invoke(app, ["check", "rmsnorm", "--impl", f"{bad}:f", "--dtype", "fp32", "--shapes", "4x64",
                            "--json", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 1 and "0 passed, 1 failed" in r.output
    assert json.loads(out.read_text())[0]["passed"] is False


def test_bad_arguments_get_clear_errors():
    r = runner.invoke(app, ["check", "nope"])
    assert r.exit_code == 2 and "unknown op" in r.output
    r = runner.invoke(app, ["bench", "rmsnorm", "--dtype", "int8"])
    assert r.exit_code == 2 and "dtype" in r.output
    r = runner.invoke(app, ["bench", "rmsnorm", "--shapes", "4096by4100"])
    assert r.exit_code == 2 and "shape" in r.output


def test_bench_writes_json_and_runs_lists_it(tmp_path):
    out = tmp_path / "run.json"
    r = runner.invoke(app, ["bench", "rmsnorm", "--impl", "ridgeline", "--impl", "torch-F", "--shapes", "2x64",
                            "--dtype", "fp32", "--budget", "0.05", "--json", str(out)], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert ("CPU figures" in r.output) != torch.cuda.is_available()
    run_id = json.loads(out.read_text())["run_id"]
    r = runner.invoke(app, ["runs"], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and run_id in r.output
    r = runner.invoke(app, ["runs", run_id], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "torch-F" in r.output


def test_bench_where_nothing_passes_exits_1(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(x, weight, eps):\n    return x * weight\n")
    r = runner.invoke(app, ["bench", "rmsnorm", "--impl", f"{bad}:f", "--shapes", "2x64", "--dtype", "fp32",
                            "--budget", "0.05", "--json", str(tmp_path / "run.json")], env={"COLUMNS": "200"})
    assert r.exit_code == 1, r.output
    assert "nothing was timed" in r.output
    assert json.loads((tmp_path / "run.json").read_text())["failures"][0]["stage"] == "check"


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the no-GPU path")
def test_probe_without_gpu_says_so():
    r = runner.invoke(app, ["probe"])
    assert r.exit_code == 2 and "no CUDA device" in r.output


def test_check_shows_a_peers_notes_in_the_table_and_the_json(tmp_path):
    # A (user) implementation that refuses a one-row batch passes on its full batch; what was not checked is
    # said in the table, the summary line and the JSON.
    picky = tmp_path / "picky.py"
    picky.write_text("import torch\n"
                     "def f(x, weight, eps):\n"
                     "    if x.shape[0] == 1:\n"
                     "        raise RuntimeError('needs [16] rows')\n"
                     "    xf = x.float()\n"
                     "    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()\n"
                     "    return y.to(x.dtype)\n")
    out = tmp_path / "check.json"
    r = runner.invoke(app, ["check", "rmsnorm", "--impl", f"{picky}:f", "--dtype", "fp32", "--shapes", "4x64",
                            "--json", str(out)], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "1 passed (1 with notes), 0 failed" in r.output
    assert "note" in r.output and "batch invariance not checked" in r.output and "needs [16] rows" in r.output
    (d,) = json.loads(out.read_text())
    assert d["passed"] and d["notes"][0].startswith("batch invariance not checked: rows 0:1 alone raised RuntimeError")
