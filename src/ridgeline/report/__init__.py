"""Reports of run records: issue-ready markdown, a self-contained HTML page, roofline and bandwidth plots.

CLI entry points live in ``ridgeline.report.cli`` (report, compare, profile). The library API below is loaded
lazily so that importing the CLI does not import matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

_API = {
    "write_report": "ridgeline.report.build",
    "resolve_run": "ridgeline.report.data",
    "render_html": "ridgeline.report.html",
    "render_markdown": "ridgeline.report.markdown",
    "make_plots": "ridgeline.report.plots",
    "Note": "ridgeline.report.rules",
    "evaluate": "ridgeline.report.rules",
}


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'ridgeline.report' has no attribute {name!r}")


__all__ = list(_API)
