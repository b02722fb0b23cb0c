"""scripts/device/run_plan.py on the CPU: the dry run prints the plans' commands; a run records a failing command
and goes on; every command's log lands in the output folder, with a summary table last."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "scripts" / "device" / "run_plan.py"
PLANS = sorted(p.stem for p in (ROOT / "scripts" / "device" / "plans").glob("*.txt"))


def run(*args, out=None, cwd=ROOT):
    env = None if out is None else dict(os.environ, OUT=str(out))
    return subprocess.run([sys.executable, str(DRIVER), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_the_named_plans_exist():
    assert {"gpu-tests", "sweep", "decode", "probe"} <= set(PLANS)
    listed = run("--list").stdout
    assert all(name in listed for name in PLANS)


def test_dry_run_prints_the_commands_and_runs_nothing(tmp_path):
    r = run("sweep", "--dry-run", out=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if not ln.startswith("#")]
    assert len(lines) == 4
    for op in ("rmsnorm", "fused_add_rmsnorm"):
        for regime in ("graph-cold", "graph-hot"):
            line = next(ln for ln in lines if f"bench {op} " in ln and f"--regime {regime}" in ln)
            assert "--shapes sweep" in line and f"$OUT/h200-bench-{op}-sweep-{regime}.json" in line
            for peer in ("torch-compile", "liger", "torch-F"):
                assert f"--impl {peer}" in line  # the plan's $PLAIN / $FUSED written out
    assert not any(tmp_path.iterdir())
    tests = run("gpu-tests", "--dry-run").stdout
    assert "pytest -q -p no:cacheprovider -m gpu tests" in tests
    assert "bench rmsnorm --shapes decode --regime graph-hot" in run("decode", "--dry-run").stdout
    assert "ridgeline probe" in run("probe", "--dry-run").stdout


def test_every_plan_parses():
    for name in PLANS:
        r = run(name, "--dry-run")
        assert r.returncode == 0 and r.stdout.count("\n") >= 2, (name, r.stderr)


def test_a_failing_command_is_recorded_and_the_rest_still_runs(tmp_path):
    plan = tmp_path / "tiny.txt"
    plan.write_text(
        "# tiny: echo commands\n"
        "env GREETING=hello\n"
        "first: echo $GREETING first && echo made > $OUT/first.txt\n"
        "fails: echo about to fail; exit 3\n"
        "slow 1: sleep 30\n"
        "last: echo last; echo \"multicast=$TORCH_SYMM_MEM_DISABLE_MULTICAST nvls=$NCCL_NVLS_ENABLE\"; "
        "python3 -c 'import ridgeline, sys; print(ridgeline.__file__)'\n"
        "keep tests/scripts/test_run_plan.py\n")
    out = tmp_path / "out"
    r = run(plan, "--no-install", "--out", out)
    assert r.returncode == 1, r.stdout + r.stderr
    logs = sorted(p.name for p in out.glob("*.log"))
    assert logs == ["01-first.log", "02-fails.log", "03-slow.log", "04-last.log"]
    assert "hello first" in (out / "01-first.log").read_text()
    assert (out / "first.txt").read_text() == "made\n"
    assert "about to fail" in (out / "02-fails.log").read_text()
    assert "killed after 1 s" in (out / "03-slow.log").read_text()
    last = (out / "04-last.log").read_text()
    assert "multicast=1 nvls=0" in last and str(ROOT / "src") in last  # PYTHONPATH=src: this tree's ridgeline
    assert (out / "test_run_plan.py").exists()  # kept
    summary = (out / "summary.txt").read_text()
    assert summary == r.stdout[r.stdout.index("plan tiny"):]  # the table is printed last
    rows = {ln.split()[0]: ln.split()[1] for ln in summary.splitlines()[3:]}
    assert rows == {"first": "0", "fails": "3", "slow": "124", "last": "0"}
    assert summary.startswith("plan tiny: 2/4 ok")


def test_only_runs_the_named_steps(tmp_path):
    plan = tmp_path / "two.txt"
    plan.write_text("a: echo a\nb: echo b\n")
    r = run(plan, "--no-install", "--only", "b", "--out", tmp_path / "o")
    assert r.returncode == 0 and sorted(p.name for p in (tmp_path / "o").glob("*.log")) == ["01-b.log"]


def test_a_malformed_plan_line_is_refused(tmp_path):
    plan = tmp_path / "bad.txt"
    plan.write_text("this line has no colon\n")
    r = run(plan, "--dry-run")
    assert r.returncode != 0 and "bad.txt:1" in r.stderr


def test_the_deadline_caps_steps_and_skips_what_cannot_run(tmp_path):
    plan = tmp_path / "late.txt"
    plan.write_text("long: sleep 60\nafter: echo after\n")
    r = run(plan, "--no-install", "--deadline", "9", "--min-step", "3", "--out", tmp_path / "o")
    summary = (tmp_path / "o" / "summary.txt").read_text()
    rows = {ln.split()[0]: ln.split()[1] for ln in summary.splitlines()[3:]}
    assert r.returncode == 1 and rows == {"long": "124", "after": "125"}, summary
    assert "skipped: deadline" in summary and "killed after 4 s" in (tmp_path / "o" / "01-long.log").read_text()


def test_pack_moves_the_outputs_into_one_tarball(tmp_path):
    import tarfile

    plan = tmp_path / "many.txt"
    plan.write_text("a: echo a > $OUT/a.json && mkdir -p $OUT/sub && echo b > $OUT/sub/b.png\nb: echo b\n")
    out = tmp_path / "o"
    r = run(plan, "--no-install", "--pack", "results", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["results.tgz", "summary.txt"]
    with tarfile.open(out / "results.tgz") as tar:
        names = sorted(tar.getnames())
    assert names == ["01-a.log", "02-b.log", "a.json", "sub/b.png"], names


def test_the_deadline_counts_the_setup_too(tmp_path, monkeypatch):
    # The wheels' install (prepare) is part of the run the deadline bounds: 26 s with 2 s of setup leaves 19 s
    # (5 s kept for the summary), under the 20 s a step needs, so the step is skipped and the summary written.
    import importlib.util
    import time

    spec = importlib.util.spec_from_file_location("run_plan_under_test", DRIVER)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # (its dataclasses look their module up)
    spec.loader.exec_module(mod)
    slow, real = [], mod.prepare

    def slow_prepare(out, install):
        slow.append(1)
        time.sleep(2)
        return real(out, install=False)

    monkeypatch.setattr(mod, "prepare", slow_prepare)
    plan = tmp_path / "one.txt"
    plan.write_text("quick: echo hi\n")
    assert mod.main([str(plan), "--deadline", "26", "--out", str(tmp_path / "o")]) == 1 and slow
    summary = (tmp_path / "o" / "summary.txt").read_text()
    assert "skipped: deadline" in summary and " 125 " in summary, summary
