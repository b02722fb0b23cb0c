"""Automatic notes: small rules over a run record that say where a number is off and the likely why.

Each rule is a plain function returning Notes (possibly none); `evaluate` runs them all. Three kinds:
run rules see the whole record, measurement rules one measurement, profile rules one attached profile.
Thresholds are module constants so a reader can see (and a test can pin) what triggers a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ridgeline.report.data import (
    SEVERITY_ORDER,
    case_key,
    check_status,
    dig,
    failed_checks,
    fmt_bytes,
    fmt_pct,
    fmt_us,
    invariance_only,
    items,
    mapping,
    noise,
    num,
    profiles_by_case,
    shape_of,
    shape_text,
    sm_count,
    wrong_checks,
)

ROOF_LOW = 0.60  # below this fraction of the binding roof a case is worth explaining
WAVES_MIN = 2.0  # fewer blocks than this many waves of SMs cannot keep enough bytes in flight
FLOOR_SHARE = 0.50  # the launch floor is at least this share of the speed-of-light time: a "small" case
SOL_LOW = 0.60
NOISE_HIGH = 0.05  # IQR / median
EXTRA_TRAFFIC = 1.20  # ncu DRAM bytes over the spec's ideal bytes
NEAR_ROOF = 0.85
PEER_LOSS = 0.95  # ours below this speedup against the best peer
WIDE_LOAD_SHARE = 0.50  # share of global loads that should be 128-bit for 16/32-bit streaming kernels
LOW_OCCUPANCY = 0.25  # 16 of 64 warps per SM or fewer
HOST_LEAK = 1.5  # cold-eager over graph-cold (plus the floor difference) beyond this: host time leaked in


@dataclass(frozen=True)
class Note:
    rule: str
    severity: str  # "bad" | "warn" | "info" | "good"
    title: str  # short name of the finding, shared by every note of the rule
    why: str  # the rule's explanation, shared by every note of the rule
    where: str  # the case: "<op> 128x4096 bf16, graph-cold" or "" for the run
    impl: str = ""
    detail: str = ""  # this case's numbers


def _list(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _where(item: dict[str, Any], regime: bool = True) -> str:
    parts = [str(item.get("op", "?")), shape_text(shape_of(item)), str(item.get("dtype", "?"))]
    if item.get("variant"):
        parts.append(str(item["variant"]))
    text = " ".join(parts)
    if regime and item.get("regime"):
        text += f", {item['regime']}"
    return text


# --- run rules ---------------------------------------------------------------------------------------------
def rule_wrong(record: dict[str, Any]) -> list[Note]:
    """A failed correctness check names the implementation: its timings there are not a result. Right values with
    rows that are not batch invariant, or calls that differ bitwise, are a caveat, not an error: those are timed
    and flagged."""
    measured = {case_key(m) for m in items(record.get("measurements"))}
    failed = failed_checks(record)
    checked = check_status(record)  # a resumed run may have re-checked (and passed) after a saved failure
    notes = []
    for key, c in failed.items():
        reasons = _list(c.get("reasons"))
        text = "; ".join(str(r) for r in reasons) or "no reason recorded"
        if invariance_only(reasons) and c.get("source") != "ours":  # ours promises batch invariance
            notes.append(Note("not-invariant", "warn", "not batch invariant or not deterministic",
                              "values match the reference on every call, but rows computed alone or a second call "
                              "differ bitwise (another summation order); timed, and flagged wherever it appears",
                              _where(c, regime=False), c.get("impl", "?"), text))
            continue
        timed = " (it was timed anyway: ignore those numbers)" if key in measured else ""
        notes.append(Note("wrong", "bad", "wrong results",
                          "an implementation that fails its check is reported as wrong, never as a win",
                          _where(c, regime=False), c.get("impl", "?"), text + timed))
    for f in items(record.get("failures")):
        # A failure saved at the check stage is followed by its check result; only one with none is unfinished.
        if f.get("stage") == "check" and case_key(f) not in checked:
            notes.append(Note("wrong", "bad", "wrong results",
                              "an implementation that fails its check is reported as wrong, never as a win",
                              _where(f, regime=False), f.get("impl", "?"),
                              f"check did not complete: {f.get('reason') or 'no reason recorded'}"))
    return notes


def rule_not_timed(record: dict[str, Any]) -> list[Note]:
    return [
        Note("not-timed", "warn", "not timed", "the case failed while timing; the sweep went on without it",
             _where(f), f.get("impl", "?"), str(f.get("reason") or "no reason recorded"))
        for f in items(record.get("failures")) if f.get("stage") != "check"
    ]


def rule_unprobed(record: dict[str, Any]) -> list[Note]:
    dev = mapping(record.get("device"))
    if dig(record, "env", "device_type") == "cpu" or dev.get("device_type") == "cpu":
        return [Note("cpu-run", "info", "CPU run", "no GPU: there is no roofline, and CPU or interpreter "
                     "times say nothing about GPU speed", "", "", "percentages of roof and SOL are empty")]
    if dev and dev.get("measured") is False:
        return [Note("unprobed", "warn", "ceilings not probed", "percentages of roof use datasheet numbers, "
                     "which real kernels cannot reach; run `ridgeline probe` on this GPU", "", "",
                     f"device profile {dev.get('name') or '?'} is not measured")]
    return []


# --- measurement rules -------------------------------------------------------------------------------------
def rule_latency_bound(m: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    roof, grid, sms = num(m.get("pct_of_roof")), num(dig(m, "launch", "grid")), sm_count(record)
    if roof is None or grid is None or not sms or roof >= ROOF_LOW or grid >= WAVES_MIN * sms:
        return []
    return [Note("latency-bound", "warn", "latency-bound",
                 f"fewer thread blocks than {WAVES_MIN:g} waves of SMs cannot keep enough loads in flight to "
                 "cover DRAM latency: split rows across more blocks or process several rows per block",
                 _where(m), m.get("impl", "?"),
                 f"grid {int(grid)} = {grid / sms:.2f} waves of {sms} SMs, {fmt_pct(roof)} of roof")]


def rule_launch_floor(m: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    floor, sol = num(m.get("floor_us")), num(m.get("sol_us"))
    pct_sol, roof = num(m.get("pct_of_sol")), num(m.get("pct_of_roof"))
    if floor is None or not sol or floor < FLOOR_SHARE * sol:
        return []
    low_sol = pct_sol is not None and pct_sol < SOL_LOW
    if not low_sol and not (roof is not None and roof < ROOF_LOW):
        return []
    detail = f"floor {fmt_us(floor)} of {fmt_us(sol)} µs SOL"
    if pct_sol is not None:
        detail += f", at {fmt_pct(pct_sol)} of SOL"
    return [Note("launch-floor", "info", "launch floor dominates",
                 "at this size the fixed cost of a launch in this regime is most of the ideal time, so "
                 "bandwidth cannot be reached: fuse with neighbours or batch calls; a low % of SOL on top "
                 "means more than one launch, or host work, per call", _where(m), m.get("impl", "?"), detail)]


def rule_unstable(m: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    nz = noise(m)
    if not ((nz is not None and nz > NOISE_HIGH) or m.get("stable") is False):
        return []
    detail = f"IQR/median {fmt_pct(nz)}" if nz is not None else "the sampler did not converge"
    if m.get("stable") is False and nz is not None:
        detail += ", sampler did not converge"
    return [Note("unstable", "warn", "unstable timing",
                 f"noise above {NOISE_HIGH:.0%} (or no convergence): differences smaller than the spread are "
                 "not real; rerun, or time with a longer budget", _where(m), m.get("impl", "?"), detail)]


def rule_host_bound(m: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    """Cold-eager samples that timed the host: recorded directly, or seen against the same case in graph-cold."""
    if m.get("regime") != "cold-eager":
        return []
    host, flush = num(m.get("host_us")), num(m.get("flush_us"))
    if m.get("host_bound") and host and flush:
        detail = f"host {host:.1f} µs per call vs flush {flush:.1f} µs"
    elif "host_bound" not in m:
        graph = next((g for g in items(record.get("measurements")) if g.get("regime") == "graph-cold"
                      and case_key(g) == case_key(m) and g.get("impl") == m.get("impl")), None)
        floors = mapping(dig(record, "device", "floors_us"))
        gap = (num(floors.get("cold-eager")) or 0.0) - (num(floors.get("graph")) or 0.0)
        g_med, c_med = num(graph and graph.get("median_us")), num(m.get("median_us"))
        if not (g_med and c_med and c_med > HOST_LEAK * (g_med + gap)):
            return []
        detail = f"{fmt_us(c_med)} µs cold-eager vs {fmt_us(g_med)} µs graph-cold (+{fmt_us(gap)} µs floors)"
    else:
        return []
    return [Note("host-bound", "warn", "host time in a cold-eager number",
                 "this call's host work is as long as the L2 flush queued before it, so the GPU idled inside the "
                 "timed region: the figure measures the host (see the host regime); compare kernels in graph-cold",
                 _where(m), m.get("impl", "?"), detail)]


def rule_throttled(m: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    if not m.get("throttled"):
        return []
    clk = num(m.get("sm_clock_mhz"))
    detail = f"SM clock {clk:.0f} MHz" if clk else "clocks dropped during timing"
    if isinstance(m.get("throttle_reasons"), list) and m["throttle_reasons"]:
        detail += " (" + ", ".join(map(str, m["throttle_reasons"])) + ")"
    return [Note("throttled", "warn", "clocks throttled", "the GPU lowered its clocks (power or heat) while "
                 "this case ran; its times are pessimistic", _where(m), m.get("impl", "?"), detail)]


def rule_loses_to_peer(m: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    sp = num(m.get("speedup_vs_best_peer"))
    if m.get("source") != "ours" or sp is None or sp >= PEER_LOSS:
        return []
    return [Note("loses-to-peer", "warn", "slower than a peer", "ours is slower than the best production "
                 "implementation here: that is where the work is", _where(m), m.get("impl", "?"),
                 f"{m.get('best_peer') or 'best peer'} is {1 / sp:.2f}x faster"
                 + (f" ({m['best_peer_caveat']})" if m.get("best_peer_caveat") else ""))]


def rule_near_roof(m: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    roof = num(m.get("pct_of_roof"))
    if roof is None or roof < NEAR_ROOF or (m.get("regime") == "graph-hot"):
        return []
    return [Note("near-roof", "good", "at the roof", f"at least {NEAR_ROOF:.0%} of the probed ceiling: little "
                 "left to gain at this size", _where(m), m.get("impl", "?"), f"{fmt_pct(roof)} of roof")]


# --- profile rules -----------------------------------------------------------------------------------------
def _kernels(p: dict[str, Any]) -> list[dict[str, Any]]:
    return items(p.get("kernels"))


def rule_spills(p: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    notes = []
    for k in _kernels(p):
        st, ld = num(k.get("spill_stores_bytes")) or 0, num(k.get("spill_loads_bytes")) or 0
        ldl, stl = num(dig(k, "sass", "local_loads")) or 0, num(dig(k, "sass", "local_stores")) or 0
        if st or ld or ldl or stl:
            notes.append(Note("spills", "bad", "register spills",
                              "values that do not fit in registers go to local memory (DRAM-backed): fewer "
                              "live values per thread, a smaller block, or more warps", _where(p, regime=False),
                              p.get("impl", "?"),
                              f"{k.get('name', 'kernel')}: {int(st)} B spill stores, {int(ld)} B spill loads, "
                              f"{int(stl)} STL / {int(ldl)} LDL in SASS"))
    return notes


def rule_extra_traffic(p: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    ideal = num(dig(p, "ncu", "ideal_bytes"))
    total = num(dig(p, "ncu", "total", "dram_bytes"))
    if not ideal or total is None or total <= EXTRA_TRAFFIC * ideal:
        return []
    return [Note("extra-traffic", "warn", "extra DRAM traffic",
                 f"ncu counted more than {EXTRA_TRAFFIC:.1f}x the bytes the op must move: re-reads that missed "
                 "L2, padding, or intermediate tensors", _where(p, regime=False), p.get("impl", "?"),
                 f"{fmt_bytes(total)} measured vs {fmt_bytes(ideal)} ideal ({total / ideal:.2f}x)")]


def rule_narrow_loads(p: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    notes = []
    for k in _kernels(p):
        counts = {str(w): int(num(c) or 0) for w, c in mapping(dig(k, "sass", "global_loads")).items()
                  if str(w).isdigit()}
        total = sum(counts.values())
        wide = counts.get("128", 0) + counts.get("256", 0)
        if total and wide / total < WIDE_LOAD_SHARE:
            mix = ", ".join(f"{w}-bit x{c}" for w, c in sorted(counts.items(), key=lambda x: -int(x[0])) if c)
            notes.append(Note("narrow-loads", "info", "narrow global loads",
                              "most global loads are narrower than 128 bits: more instructions per byte; "
                              "usually a row stride or size that Triton cannot prove 16-byte aligned",
                              _where(p, regime=False), p.get("impl", "?"), f"{k.get('name', 'kernel')}: {mix}"))
    return notes


def rule_low_occupancy(p: dict[str, Any], record: dict[str, Any]) -> list[Note]:
    notes = []
    for k in _kernels(p):
        occ = num(dig(k, "occupancy", "occupancy"))
        if occ is not None and occ <= LOW_OCCUPANCY:
            limit = dig(k, "occupancy", "limited_by") or "?"
            notes.append(Note("low-occupancy", "info", "low occupancy",
                              "few resident warps per SM leave little to hide memory latency with",
                              _where(p, regime=False), p.get("impl", "?"),
                              f"{k.get('name', 'kernel')}: {fmt_pct(occ)} theoretical, limited by {limit} "
                              f"({k.get('registers', '?')} registers, {k.get('num_warps', '?')} warps)"))
    return notes


RunRule = Callable[[dict[str, Any]], list[Note]]
ItemRule = Callable[[dict[str, Any], dict[str, Any]], list[Note]]

RUN_RULES: tuple[RunRule, ...] = (rule_unprobed, rule_wrong, rule_not_timed)
MEASUREMENT_RULES: tuple[ItemRule, ...] = (
    rule_latency_bound, rule_launch_floor, rule_unstable, rule_host_bound, rule_throttled, rule_loses_to_peer,
    rule_near_roof,
)
PROFILE_RULES: tuple[ItemRule, ...] = (rule_spills, rule_extra_traffic, rule_narrow_loads, rule_low_occupancy)


def evaluate(record: dict[str, Any]) -> list[Note]:
    """Every note for the record, worst first, in a stable order."""
    notes: list[Note] = []
    for rule in RUN_RULES:
        notes += rule(record)
    wrong = set(wrong_checks(record))
    for m in items(record.get("measurements")):
        if case_key(m) in wrong:
            continue  # a wrong implementation gets one note (wrong), not performance advice
        if m.get("regime") == "cpu":
            continue  # CPU and interpreter timings say nothing about the kernel: no advice from them
        for item_rule in MEASUREMENT_RULES:
            notes += item_rule(m, record)
    for p in profiles_by_case(record).values():
        for item_rule in PROFILE_RULES:
            notes += item_rule(p, record)
    order = {r.__name__.removeprefix("rule_"): i for i, r in enumerate((*RUN_RULES, *MEASUREMENT_RULES,
                                                                        *PROFILE_RULES))}
    return sorted(notes, key=lambda n: (SEVERITY_ORDER.get(n.severity, 9), order.get(n.rule.replace("-", "_"), 99)))


@dataclass
class NoteGroup:
    """Notes of one rule for one implementation: rendered as one line listing the cases."""

    rule: str
    severity: str
    title: str
    why: str
    impl: str
    cases: list[tuple[str, str]]  # (where, detail)


def grouped(notes: list[Note]) -> list[NoteGroup]:
    out: dict[tuple[str, str], NoteGroup] = {}
    for n in notes:
        g = out.setdefault((n.rule, n.impl), NoteGroup(n.rule, n.severity, n.title, n.why, n.impl, []))
        g.cases.append((n.where, n.detail))
    return list(out.values())
