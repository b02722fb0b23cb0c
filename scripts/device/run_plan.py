"""Run a named plan of commands on the GPU machine, from the repo root, and keep every command's log under $OUT.

Usage (on the GPU machine; nothing can be installed there from the network):
  RIDGELINE_GIT_SHA=<sha> python3 scripts/device/run_plan.py PLAN [--out DIR] [--only NAME ...] [--timeout S]
  python3 scripts/device/run_plan.py PLAN --dry-run        # print the commands, run nothing
  python3 scripts/device/run_plan.py --list                # the plans in scripts/device/plans/
PLAN is a name in scripts/device/plans/ (`sweep` reads plans/sweep.txt) or a path to a plan file.

A plan is a text file, one entry a line:
  # a comment
  env NAME=VALUE             exported to the commands that follow
  NAME [SECONDS]: COMMAND    run with bash from the repo root; $OUT is the output folder; SECONDS caps it
  keep GLOB [GLOB ...]       after the commands, copy matching files (relative to the repo root) into $OUT

Before the commands: carried wheels in .whl/ are installed offline into /tmp/site (put first on PYTHONPATH), src/
goes on PYTHONPATH, `ridgeline` on PATH runs this tree's CLI, and NVLink multicast is kept off
(TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1). The tree copied to the GPU machine has
no .git: pass the commit as RIDGELINE_GIT_SHA (and RIDGELINE_GIT_DIRTY=0) so the records name it.

Each command's stdout and stderr go to $OUT/NN-NAME.log. A failing or timed-out command is recorded and the next one
runs. A summary table (name, exit status, seconds, last line of the log) is printed last and written to
$OUT/summary.txt; the exit status is 1 if any command failed.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLANS = Path(__file__).resolve().parent / "plans"
NO_MULTICAST = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1"}
STEP = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)(?:\s+(?P<limit>\d+))?\s*:\s*(?P<cmd>.+)$")


@dataclass
class Step:
    name: str
    command: str
    limit: float | None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    name: str
    steps: list[Step]
    keep: list[str]


def plan_path(name: str) -> Path:
    p = Path(name)
    if p.suffix and p.exists():
        return p
    for ext in (".txt", ""):
        if (PLANS / f"{name}{ext}").exists():
            return PLANS / f"{name}{ext}"
    raise SystemExit(f"run_plan: no plan {name!r} (plans: {', '.join(available())})")


def available() -> list[str]:
    return sorted(p.stem for p in PLANS.glob("*.txt"))


def parse(path: Path) -> Plan:
    steps, keep, env = [], [], {}
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("env "):
            key, _, value = line[4:].strip().partition("=")
            env[key.strip()] = value.strip()
        elif line.startswith("keep "):
            keep += line[5:].split()
        elif m := STEP.match(line):
            limit = float(m["limit"]) if m["limit"] else None
            steps.append(Step(m["name"], m["cmd"], limit, dict(env)))
        else:
            raise SystemExit(f"run_plan: {path}:{n}: not 'NAME [SECONDS]: COMMAND', 'env K=V' or 'keep GLOB': {raw!r}")
    return Plan(path.stem, steps, keep)


def expand(command: str, env: dict[str, str]) -> str:
    """The command with the plan's own variables written out ($OUT and the machine's are left as they are)."""
    return re.sub(r"\$(\w+)|\$\{(\w+)\}", lambda m: env.get(m[1] or m[2], m[0]), command)


def prepare(out: Path, install: bool) -> dict[str, str]:
    """The environment every command gets (wheels installed first when there are any)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", OUT=str(out), **NO_MULTICAST)
    env.setdefault("RIDGELINE_CACHE_DIR", str(ROOT / ".device-cache"))
    env.setdefault("RIDGELINE_DATA_DIR", str(ROOT / ".device-data"))
    paths = [str(ROOT / "src")]
    wheels = sorted(glob.glob(str(ROOT / ".whl" / "*.whl")))
    if install and wheels:
        site = "/tmp/site"
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                            "--upgrade", "--target", site, *wheels], capture_output=True, text=True)
        (out / "00-wheels.log").write_text(r.stdout + r.stderr)
        print(f"wheels: {len(wheels)} from .whl/ -> {site} (rc {r.returncode})", flush=True)
        paths.insert(0, site)
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # `ridgeline` runs this tree's CLI whether or not the package is installed.
    shim = out / ".bin"
    shim.mkdir(parents=True, exist_ok=True)
    exe = shim / "ridgeline"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from ridgeline.cli import main; main()" "$@"\n')
    exe.chmod(0o755)
    env["PATH"] = f"{shim}{os.pathsep}{env.get('PATH', '')}"
    if not (ROOT / ".git").exists() and "RIDGELINE_GIT_SHA" not in env:
        print("warning: no .git here and RIDGELINE_GIT_SHA unset: the records will not name their commit", flush=True)
    return env


def run_step(i: int, step: Step, env: dict[str, str], out: Path, default_limit: float) -> tuple[int, float, Path]:
    log = out / f"{i:02d}-{step.name}.log"
    limit = step.limit or default_limit
    t0 = time.monotonic()
    with log.open("w") as f:
        f.write(f"$ {step.command}\n")
        f.flush()
        proc = subprocess.Popen(["bash", "-c", step.command], cwd=ROOT, env={**env, **step.env}, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the command's own process group, started above
            proc.wait()
            rc = 124
            f.write(f"\nrun_plan: killed after {limit:.0f} s\n")
    return rc, time.monotonic() - t0, log


def last_line(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return (lines[-1] if len(lines) > 1 else "")[:70]


def pack(out: Path, name: str) -> Path:
    """Move everything under `out` except summary.txt into out/NAME.tgz (paths kept relative to out)."""
    import tarfile

    target = out / f"{name}.tgz"
    members = sorted(p for p in out.rglob("*") if p.is_file() and p not in (target, out / "summary.txt"))
    with tarfile.open(target, "w:gz") as tar:
        for p in members:
            tar.add(p, arcname=str(p.relative_to(out)))
    for p in members:
        p.unlink()
    for d in sorted((p for p in out.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            d.rmdir()
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plan", nargs="?", help="a plan name in scripts/device/plans/ or a plan file")
    ap.add_argument("--out", help="output folder (default: $OUT, else out/PLAN)")
    ap.add_argument("--only", action="append", default=[], help="run only the named steps (repeatable)")
    ap.add_argument("--timeout", type=float, default=600.0, help="limit of a step that names none (seconds)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="wall seconds for the whole plan: each step is capped to what is left, and steps that would "
                         "get under --min-step seconds are skipped (rc 125), so the summary is always written")
    ap.add_argument("--min-step", type=float, default=20.0,
                    help="with --deadline: the fewest seconds a step may be given (default 20)")
    ap.add_argument("--pack", metavar="NAME",
                    help="after the steps, move every file under the output folder but summary.txt into NAME.tgz "
                         "(the device tool brings back at most 8 files)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands and run nothing")
    ap.add_argument("--no-install", action="store_true", help="do not install the wheels in .whl/")
    ap.add_argument("--list", action="store_true", help="list the plans")
    a = ap.parse_args(argv)
    if a.list or not a.plan:
        for name in available():
            first = next((ln for ln in (PLANS / f"{name}.txt").read_text().splitlines() if ln.startswith("#")), "")
            print(f"{name:14s} {first.lstrip('# ')}")
        return 0
    plan = parse(plan_path(a.plan))
    steps = [s for s in plan.steps if not a.only or s.name in a.only]
    if a.dry_run:
        print(f"# plan {plan.name}: {len(steps)} commands, run from {ROOT}")
        for s in steps:
            print(f"{s.name} [{s.limit or a.timeout:.0f} s]: {expand(s.command, s.env)}")
        if plan.keep:
            print(f"keep: {' '.join(plan.keep)}")
        return 0
    out = Path(a.out or os.environ.get("OUT") or ROOT / "out" / plan.name).resolve()
    start = time.monotonic()  # (before the wheels' install: the deadline is the whole run's)
    out.mkdir(parents=True, exist_ok=True)
    env = prepare(out, install=not a.no_install)
    rows = []
    for i, step in enumerate(steps, 1):
        if a.deadline is not None:
            left = a.deadline - (time.monotonic() - start) - 5
            if left < a.min_step:
                print(f"[{i}/{len(steps)}] {step.name}: skipped, {max(left, 0):.0f} s left of the deadline", flush=True)
                rows.append((step.name, 125, 0.0, None))
                continue
            step = Step(step.name, step.command, min(step.limit or a.timeout, left), step.env)
        print(f"[{i}/{len(steps)}] {step.name}: {step.command}", flush=True)
        rc, secs, log = run_step(i, step, env, out, a.timeout)
        rows.append((step.name, rc, secs, log))
        print(f"    rc {rc}, {secs:.1f} s, {log.name}", flush=True)
    for pattern in plan.keep:
        for src in glob.glob(str(ROOT / pattern)):
            if Path(src).is_file():
                shutil.copy2(src, out / Path(src).name)
    shutil.rmtree(out / ".bin", ignore_errors=True)
    table = [f"plan {plan.name}: {sum(r[1] == 0 for r in rows)}/{len(rows)} ok", "",
             f"{'step':24s} {'rc':>4s} {'s':>7s}  last line of the log"]
    table += [f"{name:24s} {rc:4d} {secs:7.1f}  {last_line(log) if log else 'skipped: deadline'}"
              for name, rc, secs, log in rows]
    (out / "summary.txt").write_text("\n".join(table) + "\n")
    if a.pack:
        pack(out, a.pack)
    print("\n" + "\n".join(table), flush=True)
    return 0 if all(r[1] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
