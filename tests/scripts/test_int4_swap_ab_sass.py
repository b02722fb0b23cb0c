"""scripts/int4_swap_ab_sass.py: the compile behind gemm.md's swap-AB finding runs and says what the write-up says."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import ridgeline.profile as P

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "int4_swap_ab_sass.py"


@pytest.mark.skipif(P.tool_path("ptxas") is None or P.tool_path("cuobjdump") is None,
                    reason="needs Triton's bundled ptxas/cuobjdump")
def test_swap_ab_takes_more_instructions_a_step():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=300, check=True).stdout
    steps = [int(n) for n in re.findall(r"(\d+) instructions a step", out)]
    assert len(steps) == 3, out
    shipped, swapped, swapped_128 = steps
    assert swapped > shipped and swapped_128 / 2 > 0.9 * shipped, out
