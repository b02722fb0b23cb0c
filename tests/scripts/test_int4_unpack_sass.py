"""scripts/int4_unpack_sass.py: the sm_90 compile behind gemm.md's int4 instruction counts runs and says what the
write-up says (the swapped decode tile takes fewer instructions a weight than x as the A operand)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ridgeline.profile as P

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "int4_unpack_sass.py"


@pytest.mark.skipif(P.tool_path("ptxas") is None or P.tool_path("cuobjdump") is None,
                    reason="needs Triton's bundled ptxas/cuobjdump")
def test_swapped_decode_tile_takes_fewer_instructions(tmp_path):
    out = tmp_path / "sass.json"
    subprocess.run([sys.executable, str(SCRIPT), "--shape", "1x4096x4096", "--json", str(out)], capture_output=True,
                   text=True, timeout=600, check=True)
    rows = json.loads(out.read_text())["rows"]
    rule, unswapped = rows[0], rows[1]
    assert "swapAB" in rule["config"] and "swapAB" not in unswapped["config"]
    assert rule["per_2048_weights_a_warp"] < 0.85 * unswapped["per_2048_weights_a_warp"], rows
    assert rule["top"].get("PRMT", 0) == 0, rule
