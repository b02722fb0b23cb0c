"""Where ridgeline keeps things: XDG cache (device profiles) and data (run records, the SQLite store)."""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(var: str, default: str) -> Path:
    base = os.environ.get(var) or str(Path.home() / default)
    return Path(base) / "ridgeline"


def cache_dir() -> Path:
    """Device profiles (probe results), keyed by GPU and driver. RIDGELINE_CACHE_DIR overrides."""
    return Path(os.environ["RIDGELINE_CACHE_DIR"]) if os.environ.get("RIDGELINE_CACHE_DIR") else _xdg(
        "XDG_CACHE_HOME", ".cache")


def data_dir() -> Path:
    """Run records and the store. RIDGELINE_DATA_DIR overrides."""
    return Path(os.environ["RIDGELINE_DATA_DIR"]) if os.environ.get("RIDGELINE_DATA_DIR") else _xdg(
        "XDG_DATA_HOME", ".local/share")


def default_db() -> Path:
    return data_dir() / "runs.sqlite"


def default_run_path(run_id: str) -> Path:
    return data_dir() / "runs" / f"{run_id}.json"
