"""The HTML report in a real headless browser: it renders, tables sort, plots decode, the console stays clean.

The page's own script runs a self-test when opened with #selftest: it clicks a numeric column header twice,
checks the rows came out ascending then descending, counts decoded plot images, and writes the result into a
<pre id="rl-selftest"> marker that --dump-dom prints. Console messages come from Chromium's stderr log.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ridgeline.report.build import write_report
from ridgeline.report.data import resolve_run

DATA = Path(__file__).resolve().parents[1] / "data"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


CHROMIUM = _chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install -y chromium); the HTML report's "
    "browser test needs a real browser")


def open_in_chromium(url: str, profile_dir: Path) -> tuple[str, list[str]]:
    """(DOM after load, console lines) of a page in headless Chromium."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
           "--disable-extensions", f"--user-data-dir={profile_dir}", "--enable-logging=stderr", "--v=0",
           "--dump-dom", url]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    assert res.returncode == 0, f"chromium exited with {res.returncode}:\n{res.stderr[-3000:]}"
    return res.stdout, [ln for ln in res.stderr.splitlines() if "CONSOLE" in ln]


def test_report_renders_in_browser(tmp_path):
    html = next(p for p in write_report(resolve_run(str(DATA / "run_h200_rmsnorm.json")), tmp_path / "r", "html")
                if p.suffix == ".html")
    dom, console = open_in_chromium(html.resolve().as_uri() + "#selftest", tmp_path / "chrome")
    assert console == [], "console messages:\n" + "\n".join(console)
    m = re.search(r'<pre id="rl-selftest" data-status="(\w+)">(.*?)</pre>', dom, re.S)
    assert m, "the page's self-test did not run (no marker in the DOM)"
    result = json.loads(m.group(2).replace("&quot;", '"'))
    assert m.group(1) == "ok", result
    assert result["tables"] >= 8 and result["sorted"] is True
    assert result["images"] == 4 and result["plots"] == 4  # every plot decoded to a real image
    assert result["errors"] == []
    assert dom.count("<table") >= 8 and "aria-sort=" in dom  # the sort left its mark on the header


def test_cpu_report_renders_in_browser(tmp_path):
    html = write_report(resolve_run(str(DATA / "run_cpu_rmsnorm.json")), tmp_path / "r", "html")[-1]
    dom, console = open_in_chromium(html.resolve().as_uri() + "#selftest", tmp_path / "chrome")
    assert console == [], "console messages:\n" + "\n".join(console)
    assert 'data-status="ok"' in dom


def test_console_errors_are_detected(tmp_path):
    # Negative control: a page that throws must show up, or the clean-console assertions above prove nothing.
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><table><tr><td>x</td></tr></table>"
                    "<script>undefinedFunction();</script></body></html>")
    dom, console = open_in_chromium(page.as_uri(), tmp_path / "chrome")
    assert "<table>" in dom
    assert any("undefinedFunction" in ln for ln in console), console
