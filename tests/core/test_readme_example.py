"""The README's "An op of your own" example is real: it is cut from the README and checked and benched here."""

from __future__ import annotations

import re
from pathlib import Path

import torch

import ridgeline

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_user_op_runs(tmp_path):
    text = README.read_text()
    section = text[text.index("## An op of your own"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    path = tmp_path / "my_op.py"
    path.write_text(code)
    results = ridgeline.check(f"{path}:SPEC", [f"{path}:mine"])
    assert results and all(r.passed for r in results), [r.reasons for r in results if not r.passed]
    record = ridgeline.bench(f"{path}:SPEC", [f"{path}:mine"], shapes=[(8, 64)], dtypes=[torch.float32],
                             budget_s=0.01)
    assert record.complete and record.measurements[0]["op"] == "scale"
