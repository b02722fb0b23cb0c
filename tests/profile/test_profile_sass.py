"""SASS parsing, access widths and theoretical occupancy (no GPU, no tools)."""

from __future__ import annotations

import re
from pathlib import Path

import ridgeline.profile as P

DATA = Path(__file__).resolve().parents[1] / "data"


# --- SASS --------------------------------------------------------------------------------------------------
def test_sass_of_captured_rmsnorm_kernel():
    text = (DATA / "sass_rmsnorm_4096_bf16_sm90.txt").read_text()
    s = P.parse_sass(text)
    assert s["instructions"] == sum(1 for ln in text.splitlines() if re.match(r"^\s+/\*[0-9a-f]{4}\*/\s+\S", ln))
    assert s["global_loads"] == {"128": 4} and s["global_stores"] == {"128": 2}
    assert s["histogram"]["SHFL"] == 8 and s["histogram"]["EXIT"] == 2 and s["histogram"]["BAR"] == 3
    assert s["tensor_cores"] == "none" and s["local_loads"] == 0 and s["local_stores"] == 0
    assert s["shared_loads"] == 2 and s["shared_stores"] == 2
    counts = list(s["histogram"].values())
    assert counts == sorted(counts, reverse=True)


def test_sass_of_handmade_lines():
    s = P.parse_sass((DATA / "sass_handmade_sm90.txt").read_text())
    assert s["instructions"] == 18
    assert s["global_loads"] == {"64": 1, "32": 1, "16": 1} and s["global_stores"] == {"64": 1, "8": 1}
    assert s["tensor_cores"] == "HGMMA+HMMA" and s["tensor_core_ops"] == {"HGMMA": 2, "HMMA": 1}
    assert s["async_copies"] == {"LDGSTS": 1, "UTMALDG": 1}
    assert s["local_loads"] == 1 and s["local_stores"] == 2 and s["atomics"] == 1


def test_access_width():
    widths = {"LDG.E.128": 128, "LDG.E.128.CONSTANT": 128, "LDG.E.64": 64, "LDG.E": 32, "LDG.E.U16": 16,
              "LDG.E.S8": 8, "STG.E.ENL2.256": 256, "LDG.E.EF.64": 64}
    for op, bits in widths.items():
        assert P.access_width(op) == bits, op


# --- occupancy ---------------------------------------------------------------------------------------------
def test_occupancy_sm90():
    o = P.occupancy(32, 32, 8)
    assert (o["blocks_per_sm"], o["occupancy"], o["limited_by"]) == (8, 1.0, "warps")
    o = P.occupancy(85, 64, 16)  # 85 regs -> 2816 per warp -> 23 warps of registers -> one 16-warp block
    assert (o["blocks_per_sm"], o["warps_per_sm"], o["occupancy"], o["limited_by"]) == (1, 16, 0.25, "registers")
    o = P.occupancy(255, 0, 4)
    assert (o["by_registers"], o["occupancy"]) == (2, 0.125)
    o = P.occupancy(32, 100 * 1024, 4)
    assert (o["blocks_per_sm"], o["limited_by"]) == (2, "shared")
    assert P.occupancy(32, 300 * 1024, 4)["blocks_per_sm"] == 0
    assert P.occupancy(16, 0, 1)["limited_by"] == "blocks"  # 32 one-warp blocks
    assert "note" in P.occupancy(32, 0, 8, arch=75) and "note" not in P.occupancy(32, 0, 8, arch=80)




def test_loops_are_the_backward_branches():
    text = (DATA / "sass_rmsnorm_4096_bf16_sm90.txt").read_text()
    (loop,) = P.sass_loops(text)  # the row loop; the trailing `BRA 0xe80` to itself is the end-of-kernel trap
    assert (loop["start"], loop["end"]) == ("0x280", "0xe60")
    addresses = [int(m.group(1), 16) for m in (re.match(r"^\s+/\*([0-9a-f]{4})\*/\s+\S", ln) for ln in
                                                text.splitlines()) if m]
    assert loop["instructions"] == sum(0x280 <= a <= 0xe60 for a in addresses)
    assert sum(loop["histogram"].values()) <= loop["instructions"] and loop["histogram"]["SHFL"] == 8
    assert P.parse_sass(text)["loops"] == [loop]


def test_loops_nested_and_labelled():
    lines = [f"        /*{a:04x}*/                   {op} ;" for a, op in [
        (0x10, "MOV R1, R2"), (0x20, "IADD3 R1, R1, 1, RZ"), (0x30, "FFMA R3, R3, R3, R3"),
        (0x40, "@P0 BRA 0x20"), (0x50, "HMMA.16816.F32.BF16 R4, R8, R12, R4"), (0x60, "@!P1 BRA 0x10"),
        (0x70, "BRA `(.L_x_3)"), (0x80, "EXIT")]]
    inner, outer = sorted(P.sass_loops("\n".join(lines)), key=lambda lp: lp["instructions"])
    assert (inner["start"], inner["end"], inner["instructions"]) == ("0x20", "0x40", 3)
    assert (outer["start"], outer["end"], outer["instructions"]) == ("0x10", "0x60", 6)
    assert outer["histogram"]["HMMA"] == 1 and outer["histogram"]["BRA"] == 2
