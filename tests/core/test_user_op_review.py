"""Edges of the user-op path found in review: each was a traceback, a false pass or a wrong message."""

from __future__ import annotations

import json
import os

import pytest
import torch
from test_user_op import TOY  # the toy op of the contract test
from typer.testing import CliRunner

import ridgeline
from ridgeline.cli import app
from ridgeline.core import registry

runner = CliRunner()
WIDE = {"COLUMNS": "300"}


@pytest.fixture
def toy(tmp_path):
    path = tmp_path / "toy.py"
    path.write_text(TOY.replace('name="scale_shift"', f'name="toy_{tmp_path.name[-12:].replace("-", "_")}"'))
    return path


def one_line(r, text):
    assert r.exit_code == 2 and text in r.output and "Traceback" not in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output


def test_resume_from_another_folder_finds_the_users_files(toy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run.json"
    r = runner.invoke(app, ["bench", "toy.py:SPEC", "--impl", "toy.py:torch_impl", "--shapes", "tiny", "--dtype",
                            "fp32", "--budget", "0.02", "--json", str(out)], env=WIDE)
    assert r.exit_code == 0, r.output
    d = json.loads(out.read_text())
    assert all(os.path.isabs(i.rsplit(":", 1)[0]) for i in d["settings"]["impls"])
    d["measurements"], d["complete"] = d["measurements"][:1], False
    out.write_text(json.dumps(d))
    monkeypatch.chdir(tmp_path.parent)
    r = runner.invoke(app, ["bench", "--resume", str(out)], env=WIDE)
    assert r.exit_code == 0, r.output


def test_a_bad_setting_in_a_resumed_record_is_one_line(toy, tmp_path):
    out = tmp_path / "run.json"
    ridgeline.bench(f"{toy}:SPEC", [f"{toy}:torch_impl"], shapes=[(2, 8)], dtypes=["fp32"], budget_s=0.01,
                    json_path=out)
    d = json.loads(out.read_text())
    for key, value, text in (("regimes", ["bogus"], "regime"), ("shapes", 5, "resume:"),
                             ("budget_s", "abc", "resume:")):
        bad = json.loads(json.dumps(d))
        bad["settings"][key], bad["complete"] = value, False
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        one_line(runner.invoke(app, ["bench", "--resume", str(tmp_path / "bad.json")], env=WIDE), text)


def test_a_broken_contract_is_one_line_in_bench(toy, tmp_path):
    for old, new, text in (("return {\"x\": x,", "raise RuntimeError('mk broken'); return {\"x\": x,", "mk broken"),
                           ("n = shape[0] * shape[1]", "n = shape[5]", "cost(")):
        path = tmp_path / f"b{len(text)}.py"
        src = TOY.replace(old, new)
        assert src != TOY
        path.write_text(src.replace('name="scale_shift"', f'name="broken{len(text)}"'))
        r = runner.invoke(app, ["bench", f"{path}:SPEC", "--impl", f"{path}:torch_impl", "--dtype", "fp32",
                                "--shapes", "4x4", "--budget", "0.02"], env=WIDE)
        assert r.exit_code == 2 and text in r.output and "Traceback" not in r.output, r.output


def test_check_without_edge_cases_says_so(toy, tmp_path):
    path = tmp_path / "noedge.py"
    path.write_text(toy.read_text().replace('"edge": [(1, 1), (5, 37), (0, 8)]', '"other": [(2, 2)]')
                    .replace('name="toy_', 'name="noedge_'))
    one_line(runner.invoke(app, ["check", f"{path}:SPEC", "--impl", f"{path}:torch_impl", "--dtype", "fp32"],
                           env=WIDE), "no edge cases")


def test_json_that_is_a_folder_is_refused_first(toy, tmp_path):
    one_line(runner.invoke(app, ["check", f"{toy}:SPEC", "--impl", f"{toy}:torch_impl", "--json", str(tmp_path)],
                           env=WIDE), "is a folder")


def test_an_implementation_that_exits_is_a_failure_not_an_exit(toy, tmp_path):
    (tmp_path / "exits.py").write_text("def exits(x, alpha, shift):\n    raise SystemExit(3)\n")
    results = ridgeline.check(f"{toy}:SPEC", f"{tmp_path / 'exits.py'}:exits", "fp32",
                              cases=[ridgeline.Case((2, 8), torch.float32)])
    assert len(results) == 1 and not results[0].passed and "SystemExit" in results[0].reasons[0]


def test_python_api_takes_names_as_strings_and_validates_cases(toy):
    spec = registry.get_spec(f"{toy}:SPEC")
    with pytest.raises(ValueError, match="rank 2"):
        ridgeline.check(spec, [f"{toy}:torch_impl"], cases=[ridgeline.Case((4, 4, 4), torch.float32)])
    with pytest.raises(ValueError, match="takes fp32, fp16"):
        ridgeline.check(spec, [f"{toy}:torch_impl"], cases=[ridgeline.Case((4, 4), torch.bfloat16)])
    record = ridgeline.bench(spec, f"{toy}:torch_impl", shapes=[(2, 8)], dtypes="fp32", regimes="auto",
                             budget_s=0.01)
    assert record.settings["spec_file"] == f"{toy.resolve()}:SPEC"  # an object from a file keeps its origin
    assert registry.get_spec(f"{toy}:SPEC") is spec  # and loading its file again is no clash


def test_variants_message_names_the_op(toy):
    one_line(runner.invoke(app, ["bench", f"{toy}:SPEC", "--impl", f"{toy}:torch_impl", "--dtype", "fp32",
                                 "--variant", "foo"], env=WIDE), "takes no variants")
    one_line(runner.invoke(app, ["bench", "rmsnorm", "--variant", "+"], env=WIDE), "variant: rmsnorm knows")
