"""The report's tables as data (text + sort key + style per cell), rendered by both markdown.py and html.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline.records.reasons import ORDER_VARIANCE
from ridgeline.report.data import (
    DASH,
    REGIME_TEXT,
    Group,
    case_key,
    check_status,
    dig,
    failed_checks,
    fmt_any,
    fmt_bytes,
    fmt_int,
    fmt_pct,
    fmt_rate,
    fmt_us,
    fmt_x,
    groups,
    items,
    mapping,
    noise,
    num,
    sample_count,
    shape_of,
    shape_text,
    wrong_checks,
)


@dataclass
class Cell:
    text: str
    sort: float | str | None = None  # numeric cells sort by value; None sorts last
    style: str = ""  # "best" | "bad" | "warn" | "good" | "struck" (a wrong implementation's number) | ""

    @classmethod
    def number(cls, value: Any, text: str, style: str = "") -> Cell:
        return cls(text, num(value), style)


@dataclass
class Table:
    title: str
    headers: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    numeric: set[int] = field(default_factory=set)  # right-aligned columns
    caption: str = ""


def _t(text: Any) -> Cell:
    return Cell(fmt_any(text), None if text is None else str(text))


# --- environment -------------------------------------------------------------------------------------------
def environment_table(record: dict[str, Any]) -> Table:
    env, dev = mapping(record.get("env")), mapping(record.get("device"))
    rows: list[tuple[str, str]] = []

    def add(label: str, value: Any, keep_empty: bool = True) -> None:
        if value is None or value == "" or value == {}:
            if keep_empty:
                rows.append((label, DASH))
            return
        rows.append((label, value if isinstance(value, str) else fmt_any(value)))

    gpu = env.get("gpu")
    if env.get("gpu_count") and num(env.get("gpu_count")) and num(env.get("gpu_count")) > 1:
        gpu = f"{gpu} (x{int(num(env['gpu_count']) or 0)})"
    add("device", f"{gpu} ({env.get('device_type')})" if gpu else env.get("device_type"))
    add("compute capability", env.get("compute_capability"))
    add("SMs", fmt_int(env.get("sm_count")) if env.get("sm_count") else None)
    add("GPU memory", fmt_bytes(env.get("gpu_memory_bytes")) if env.get("gpu_memory_bytes") else None)
    add("driver", env.get("driver"))
    add("CUDA", env.get("cuda"))
    add("torch", env.get("torch"))
    add("triton", env.get("triton"))
    sha = env.get("git_sha")
    rl = env.get("ridgeline")
    if sha:
        rl = f"{rl} @ {str(sha)[:12]}{' (dirty)' if env.get('git_dirty') else ''}"
    add("ridgeline", rl)
    add("python", env.get("python"))
    add("platform", env.get("platform"))
    add("CPU", env.get("cpu"), keep_empty=False)
    add("host", env.get("hostname"))
    if env.get("triton_interpret"):
        add("TRITON_INTERPRET", env.get("triton_interpret"))
    clocks = env.get("clocks_at_start")
    if isinstance(clocks, dict) and clocks:
        add("clocks at start", ", ".join(f"{k.removesuffix('_mhz')} {fmt_any(v)} MHz" if k.endswith("_mhz")
                                         else f"{k} {fmt_any(v)}" for k, v in clocks.items() if v is not None))
    if dev:
        if dev.get("measured"):
            probed = "probed"
        elif dev.get("device_type") == "cpu" or env.get("device_type") == "cpu":
            probed = "CPU: no ceilings"
        else:
            probed = "NOT probed (datasheet)"
        add("device profile", f"{dev.get('name') or '?'}, {probed}")
        bw = [f"{k.removesuffix('_gbps')} {fmt_rate(dev.get(k))} GB/s" for k in
              ("copy_gbps", "read_gbps", "write_gbps", "l2_gbps") if num(dev.get(k))]
        add("bandwidth ceilings", ", ".join(bw), keep_empty=False)
        tf = mapping(dev.get("tflops"))
        add("compute ceilings", ", ".join(f"{k} {fmt_rate(v)} TFLOP/s" for k, v in tf.items() if num(v)),
            keep_empty=False)
        floors = mapping(dev.get("floors_us"))
        add("launch floors", ", ".join(f"{k} {fmt_us(v)} µs" for k, v in floors.items() if num(v)),
            keep_empty=False)
    add("run", f"{record.get('run_id', '?')} ({record.get('kind', '?')}), started {record.get('created', '?')}"
        + ("" if record.get("complete") else ", INCOMPLETE (interrupted or still running)"))
    return Table("Environment", ["", "value"], [[Cell(k), Cell(v)] for k, v in rows])


# --- timing regimes ----------------------------------------------------------------------------------------
def regime_table(record: dict[str, Any]) -> Table:
    by: dict[str, list[dict[str, Any]]] = {}
    for m in items(record.get("measurements")):
        by.setdefault(str(m.get("regime", "?")), []).append(m)
    rows = []
    for regime in sorted(by):
        ms = by[regime]
        ns = [n for n in (sample_count(m) for m in ms) if n]
        unstable = sum(1 for m in ms if m.get("stable") is False)
        floor = dig(record, "device", "floors_us", regime) or dig(record, "device", "floors_us",
                                                                  regime.split("-")[0])
        rows.append([
            Cell(regime, regime), Cell(REGIME_TEXT.get(regime, "")),
            Cell.number(len(ms), str(len(ms))),
            Cell(f"{min(ns)}–{max(ns)}" if ns and min(ns) != max(ns) else (str(ns[0]) if ns else DASH),
                 min(ns) if ns else None),
            Cell.number(sum(ns), fmt_int(sum(ns))),
            Cell.number(unstable, str(unstable), "warn" if unstable else ""),
            Cell.number(floor, fmt_us(floor)),
        ])
    budget = dig(record, "settings", "budget_s")
    cap = f"Sampling stops when the median is stable or the budget ({fmt_any(budget)} s per case) ends." \
        if budget else ""
    return Table("Timing regimes", ["regime", "what it measures", "cases", "samples per case", "samples",
                                    "not converged", "launch floor µs"], rows, {2, 3, 4, 5, 6}, cap)


# --- measurements ------------------------------------------------------------------------------------------
MEASUREMENT_HEADERS = ["shape", "impl", "µs", "GB/s", "TFLOP/s", "% of roof", "% of SOL", "speedup",
                       "noise", "n", "launch", "check"]


def measurement_table(record: dict[str, Any], group: Group) -> Table:
    wrong = wrong_checks(record)
    status = check_status(record)
    # The fastest correct implementation per shape gets bold.
    best: dict[tuple[int, ...], float] = {}
    for m in group.items:
        med = num(m.get("median_us"))
        if med is not None and case_key(m) not in wrong and not m.get("suspect"):
            s = shape_of(m)
            best[s] = min(best.get(s, med), med)
    baselines = {m.get("baseline") for m in group.items if m.get("baseline")}
    base_name = next(iter(baselines)) if len(baselines) == 1 else "baseline"
    rows = []
    for m in group.items:
        key, med = case_key(m), num(m.get("median_us"))
        is_wrong = key in wrong and not m.get("caveat")  # (a caveat: the bench timed the peer, flagged, on purpose)
        is_suspect = bool(m.get("suspect"))
        is_best = med is not None and not is_wrong and not is_suspect and med == best.get(shape_of(m))
        nz = noise(m)
        launch = m.get("launch") if isinstance(m.get("launch"), dict) else {"config": m.get("launch")}
        launch_text = " ".join(x for x in (f"grid {launch['grid']}" if launch.get("grid") is not None else "",
                                           str(launch.get("config") or "")) if x) or DASH
        caveat = str(m.get("caveat") or "")
        check = "WRONG" if is_wrong else ("ok" if status.get(key) else (
            caveat.removesuffix(" (values checked)") if caveat.startswith(ORDER_VARIANCE) else caveat or DASH))
        if check == "ok" and m.get("check_notes"):  # e.g. batch invariance not checked: the peer refused rows 0:1
            check = "ok (" + "; ".join(map(str, m["check_notes"])) + ")"
        if is_suspect:  # caught by the bench's guards: never the best, never a speedup
            check = "SUSPECT: " + "; ".join(sorted({str(r).split(":")[0] for r in m["suspect"]}))
        n = sample_count(m)
        rows.append([
            Cell(shape_text(shape_of(m)), _shape_sort(shape_of(m))),
            Cell(str(m.get("impl", "?")) + (" (ours)" if m.get("source") == "ours" else ""), m.get("impl", "")),
            Cell.number(med, fmt_us(med), "best" if is_best else ("struck" if is_wrong else "")),
            Cell.number(m.get("gbps"), fmt_rate(m.get("gbps"))),
            Cell.number(m.get("tflops"), fmt_rate(m.get("tflops"))),
            Cell.number(m.get("pct_of_roof"), fmt_pct(m.get("pct_of_roof"))),
            Cell.number(m.get("pct_of_sol"), fmt_pct(m.get("pct_of_sol"))),
            Cell.number(m.get("speedup_vs_baseline"), fmt_x(m.get("speedup_vs_baseline"))),
            Cell.number(nz, fmt_pct(nz), "warn" if (nz or 0) > 0.05 or m.get("stable") is False else ""),
            Cell.number(n, fmt_int(n)),
            Cell(launch_text, launch_text if launch_text != DASH else None),
            Cell(check, check if check != DASH else None, "bad" if is_wrong or is_suspect else ""),
        ])
    headers = list(MEASUREMENT_HEADERS)
    headers[7] = f"speedup vs {base_name}"
    cap = ("µs: median device time. % of roof: achieved bandwidth (or FLOP/s) over the probed ceiling that binds. "
           "% of SOL: speed-of-light time (launch floor + ideal bytes / copy bandwidth) over the median. "
           "noise: IQR / median. Bold: fastest correct implementation at the shape; struck out: wrong results; "
           "'not batch invariant': right values, but rows alone differ bitwise from the same rows in a batch; "
           "'not deterministic': right values, but two calls on the same inputs differ bitwise. "
           "SUSPECT: caught by a guard (result reuse, work outside the timed stream, timer tampered, faster than "
           "the speed of light): its time is shown, never counted.")
    return Table(group.title, headers, rows, {2, 3, 4, 5, 6, 7, 8, 9}, cap)


def _shape_sort(shape: tuple[int, ...]) -> float:
    # Sort by element count, then by the last dim (a float keeps JS sorting numeric).
    n = 1
    for d in shape:
        n *= d
    return float(n) + (shape[-1] / 1e6 if shape else 0.0)


def measurement_tables(record: dict[str, Any]) -> list[tuple[Group, Table]]:
    return [(g, measurement_table(record, g)) for g in groups(record)]


# --- correctness -------------------------------------------------------------------------------------------
def check_summary_table(record: dict[str, Any]) -> Table:
    per: dict[str, list[int]] = {}
    for c in items(record.get("checks")):
        counts = per.setdefault(str(c.get("impl", "?")), [0, 0])
        counts[0 if c.get("passed") else 1] += 1
    rows = [[Cell(impl, impl), Cell.number(p, str(p)), Cell.number(f, str(f), "bad" if f else "good")]
            for impl, (p, f) in sorted(per.items())]
    return Table("Correctness", ["impl", "cases passed", "cases failed"], rows, {1, 2})


def failed_check_table(record: dict[str, Any]) -> Table:
    rows = []
    for c in failed_checks(record).values():
        worst = max(items(c.get("outputs")),
                    key=lambda o: num(o.get("worst_ratio")) or 0.0, default=None)
        worst_text = DASH
        if worst:
            worst_text = (f"{worst.get('name', '?')}: max |err| {fmt_any(num(worst.get('max_abs_err')))}, "
                          f"{fmt_any(num(worst.get('worst_ratio')))}x tolerance")
        rows.append([
            Cell(str(c.get("impl", "?")), c.get("impl", "")),
            Cell(f"{c.get('op', '?')} {shape_text(shape_of(c))} {c.get('dtype', '?')}"
                 + (f" {c['variant']}" if c.get("variant") else "")),
            Cell("; ".join(str(r) for r in c["reasons"]) if isinstance(c.get("reasons"), list) and c["reasons"]
                 else DASH),
            Cell(worst_text),
        ])
    return Table("Failed checks", ["impl", "case", "reasons", "worst output"], rows)


def failures_table(record: dict[str, Any]) -> Table:
    rows = [[
        Cell(str(f.get("impl", "?")), f.get("impl", "")),
        Cell(f"{f.get('op', '?')} {shape_text(shape_of(f))} {f.get('dtype', '?')}"
             + (f" {f['variant']}" if f.get("variant") else "")),
        _t(f.get("regime")), _t(f.get("stage")), Cell(str(f.get("reason") or DASH)),
    ] for f in items(record.get("failures"))]
    return Table("Failures", ["impl", "case", "regime", "stage", "reason"], rows)


# --- profiles ----------------------------------------------------------------------------------------------
def _dicts(items: Any) -> list[dict[str, Any]]:
    return [x for x in items if isinstance(x, dict)] if isinstance(items, list) else []


def profile_title(p: dict[str, Any]) -> str:
    v = f" {p['variant']}" if p.get("variant") else ""
    return f"{p.get('op', '?')} / {p.get('impl', '?')} at {shape_text(shape_of(p))} {p.get('dtype', '?')}{v}"


def profile_summary(p: dict[str, Any]) -> str:
    """One line: where the facts come from and the launch they describe."""
    dev = mapping(p.get("device"))
    text = ""
    if dev:
        where = dev.get("name") or ("a CUDA GPU" if dev.get("cuda") else "no GPU (ahead-of-time compilation)")
        text = f"Profiled on {where}."
    launch = mapping(p.get("launch"))
    if launch:
        parts = ", ".join(f"{k.replace('_', ' ')} {fmt_any(v)}" for k, v in launch.items())
        text += (" " if text else "") + f"Launch: {parts}."
    return text


def compile_table(p: dict[str, Any]) -> Table:
    rows = []
    for k in _dicts(p.get("kernels")):
        occ = k.get("occupancy") if isinstance(k.get("occupancy"), dict) else {}
        spills = (num(k.get("spill_stores_bytes")) or 0) + (num(k.get("spill_loads_bytes")) or 0)
        rows.append([
            Cell(str(k.get("name", "?"))), _t(k.get("target")), _t(k.get("source")),
            Cell.number(k.get("registers"), fmt_int(k.get("registers"))),
            Cell.number(spills, f"{fmt_int(k.get('spill_stores_bytes'))} / {fmt_int(k.get('spill_loads_bytes'))}",
                        "bad" if spills else ""),
            Cell.number(k.get("shared_bytes"), fmt_int(k.get("shared_bytes"))),
            Cell.number(k.get("num_warps"), fmt_int(k.get("num_warps"))),
            Cell.number(k.get("num_stages"), fmt_int(k.get("num_stages"))),
            Cell.number(occ.get("blocks_per_sm"), fmt_int(occ.get("blocks_per_sm"))),
            Cell.number(occ.get("occupancy"), fmt_pct(occ.get("occupancy"))),
            _t(occ.get("limited_by")),
        ])
    return Table("Compiled kernels", ["kernel", "target", "from", "registers", "spill st / ld B", "shared B",
                                      "warps", "stages", "blocks/SM", "occupancy", "limited by"], rows,
                 {3, 4, 5, 6, 7, 8, 9})


def _widths(d: Any) -> str:
    if not isinstance(d, dict) or not d:
        return DASH
    widths = sorted(((int(w), c) for w, c in d.items() if str(w).isdigit() and num(c)), reverse=True)
    return ", ".join(f"{w}-bit x{int(num(c) or 0)}" for w, c in widths) or DASH


def sass_table(p: dict[str, Any]) -> Table:
    rows = []
    for k in _dicts(p.get("kernels")):
        s = k.get("sass")
        if not isinstance(s, dict) or not s:
            continue
        top = ", ".join(f"{op} {c}" for op, c in list(mapping(s.get("histogram")).items())[:8])
        rows.append([
            Cell(str(k.get("name", "?"))), Cell.number(s.get("instructions"), fmt_int(s.get("instructions"))),
            Cell(_widths(s.get("global_loads"))), Cell(_widths(s.get("global_stores"))),
            Cell(str(s.get("tensor_cores") or "none")),
            Cell.number((s.get("local_loads") or 0) + (s.get("local_stores") or 0),
                        f"{fmt_int(s.get('local_loads'))} / {fmt_int(s.get('local_stores'))}",
                        "bad" if (s.get("local_loads") or s.get("local_stores")) else ""),
            Cell(top or DASH),
        ])
    return Table("SASS", ["kernel", "instructions", "global loads (LDG)", "global stores (STG)", "tensor cores",
                          "LDL / STL", "most frequent opcodes"], rows, {1})


def loops_table(p: dict[str, Any]) -> Table:
    """Each kernel's loops (backward branches in the SASS): the instructions one trip through a body takes, the
    count that sets an issue-bound kernel's speed (the SASS table's totals include the prologue and epilogue)."""
    rows = []
    for k in _dicts(p.get("kernels")):
        s = k.get("sass") if isinstance(k.get("sass"), dict) else {}
        for lp in _dicts(s.get("loops")):
            top = ", ".join(f"{op} {c}" for op, c in list(mapping(lp.get("histogram")).items())[:8])
            rows.append([Cell(str(k.get("name", "?"))), Cell(f"{lp.get('start', '?')}-{lp.get('end', '?')}"),
                         Cell.number(lp.get("instructions"), fmt_int(lp.get("instructions"))), Cell(top or DASH)])
    return Table("SASS loops (one trip)", ["kernel", "addresses", "instructions", "most frequent opcodes"], rows, {2})


def ncu_table(p: dict[str, Any]) -> Table:
    ncu = p.get("ncu") if isinstance(p.get("ncu"), dict) else {}
    rows = []
    for k in _dicts(ncu.get("kernels")):
        rows.append([
            Cell(str(k.get("name", "?"))),
            Cell.number(k.get("time_us"), fmt_us(k.get("time_us"))),
            Cell.number(k.get("dram_bytes_read"), fmt_bytes(k.get("dram_bytes_read"))),
            Cell.number(k.get("dram_bytes_write"), fmt_bytes(k.get("dram_bytes_write"))),
            _pct_cell(k.get("dram_pct")),
            _pct_cell(k.get("sm_pct")),
            _pct_cell(k.get("occupancy_pct")), _pct_cell(k.get("tensor_pct")), _pct_cell(k.get("l2_hit_pct")),
            _t(k.get("grid")), _t(k.get("block")), _t(k.get("registers")),
        ])
    total = ncu.get("total") if isinstance(ncu.get("total"), dict) else {}
    ideal, dram = num(ncu.get("ideal_bytes")), num(total.get("dram_bytes"))
    cap = ""
    if dram is not None:
        cap = f"Total DRAM traffic {fmt_bytes(dram)}"
        if ideal:
            cap += f" against {fmt_bytes(ideal)} the op must move ({dram / ideal:.2f}x)"
        cap += f"; kernel time {fmt_us(total.get('time_us'))} µs (ncu, {ncu.get('cache_control', 'caches flushed')})."
    return Table("Nsight Compute", ["kernel", "µs", "DRAM read", "DRAM write", "DRAM % peak", "SM % peak",
                                    "achieved occupancy", "tensor pipe busy", "L2 hit", "grid", "block",
                                    "registers"], rows, {1, 2, 3, 4, 5, 6, 7, 8}, cap)


def stalls_table(p: dict[str, Any], top: int = 5) -> Table:
    """Why each kernel's warps waited: ncu's cycles between two issues of one warp, split by stall reason (the
    largest few, with their share). Read it where the schedulers issue well under every cycle."""
    ncu = p.get("ncu") if isinstance(p.get("ncu"), dict) else {}
    rows = []
    for k in _dicts(ncu.get("kernels")):
        stalls = mapping(k.get("stalls"))
        if not stalls:
            continue
        total = num(k.get("cycles_per_issue")) or sum(v for v in stalls.values() if num(v) is not None) or None
        parts = []
        for reason, v in list(stalls.items())[:top]:
            x = num(v)
            if x is None:
                continue
            share = f" ({x / total:.0%})" if total else ""
            parts.append(f"{reason} {x:.2f}{share}")
        rows.append([Cell(str(k.get("name", "?"))), _pct_cell(k.get("issue_active_pct")),
                     Cell.number(total, f"{total:.2f}" if total else DASH), Cell(", ".join(parts) or DASH)])
    return Table("Warp stalls (Nsight Compute)", ["kernel", "issue slots busy", "cycles per issue per warp",
                                                  "largest stall reasons (cycles per issue)"], rows, {1, 2})


def _pct_cell(v: Any) -> Cell:
    x = num(v)
    return Cell.number(v, fmt_pct(x / 100) if x is not None else DASH)


def kineto_table(p: dict[str, Any]) -> Table:
    kin = p.get("kineto") if isinstance(p.get("kineto"), dict) else {}
    rows = [[Cell(str(k.get("name", "?"))), Cell.number(k.get("calls"), fmt_int(k.get("calls"))),
             Cell.number(k.get("device_us_avg"), fmt_us(k.get("device_us_avg"))),
             Cell.number(k.get("device_us_total"), fmt_us(k.get("device_us_total")))]
            for k in _dicts(kin.get("kernels"))]
    cap = f"Trace: {Path(str(kin['trace'])).name} (open in chrome://tracing or Perfetto)." if kin.get("trace") else ""
    return Table("Kernels in the torch profiler trace", ["kernel", "calls", "µs per call", "µs total"], rows,
                 {1, 2, 3}, cap)
