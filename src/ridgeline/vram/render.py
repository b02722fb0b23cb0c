"""Rich tables for a :class:`~ridgeline.vram.planner.Plan`. Sizes are shown in bytes and GiB (2**30)."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .planner import Plan, Term, gib

KIND_STYLE = {"exact": "green", "engine": "cyan", "estimate": "yellow", "input": "white"}


def _b(n: int | float) -> str:
    return f"{int(n):,}"


def _g(n: int | float) -> str:
    return f"{gib(n):,.2f}"


def _kind(kind: str) -> Text:
    return Text(kind, style=KIND_STYLE.get(kind, ""))


def header(p: Plan) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    m = p.model
    arch = f"{m['architecture']} ({m['model_type']}), {m['num_layers']} layers, {m['attention']}"
    if "moe" in m:
        arch += f", MoE {m['moe']['num_experts']} experts top-{m['moe']['top_k']}"
    if m["sliding_window_layers"]:
        arch += f", {m['sliding_window_layers']} sliding-window layers"
    t.add_row("model", f"{m['name']}  [dim]{m['source']}[/dim]")
    t.add_row("architecture", arch)
    g = p.gpu
    t.add_row("GPU", f"{p.num_gpus} x {g.name}: {_b(g.total_bytes)} bytes = {_g(g.total_bytes)} GiB each"
              + (" (detected)" if g.detected else " (table)"))
    t.add_row("parallel", f"tp={p.tp}, dp={p.dp}" + (", expert parallel" if p.expert_parallel else ""))
    i = p.inputs
    t.add_row("formats", f"weights {i['dtype']}, KV {i['kv_dtype']} ({i['kv_bytes_per_element']} B/elem), "
              f"block {i['block_size']} tokens")
    t.add_row("scheduler", f"max_model_len {i['max_model_len']:,}, max_num_batched_tokens "
              f"{i['max_num_batched_tokens']:,}, max_num_seqs {i['max_num_seqs']:,}, "
              f"gpu_memory_utilization {i['gpu_memory_utilization']:g}")
    return t


def _table(title: str, label: str, numeric: tuple[str, ...], trailing: tuple[str, ...] = ()) -> Table:
    """A left-titled table: a label column, right-aligned number columns, then text columns."""
    t = Table(title=title, title_justify="left")
    t.add_column(label)
    for c in numeric:
        t.add_column(c, justify="right")
    for c in trailing:
        t.add_column(c)
    return t


def weights_table(p: Plan) -> Table:
    t = _table("Weights (exact, from the architecture)", "component",
               ("parameters", "params / rank", "bytes / rank", "GiB / rank"),
               ("sharding",))
    for c in p.weight_components:
        t.add_row(c.name + (" [q]" if c.quantized else ""), _b(c.params), _b(c.params_per_rank),
                  _b(c.bytes_per_rank), _g(c.bytes_per_rank), c.sharding)
    t.add_section()
    t.add_row("[bold]total[/bold]", f"[bold]{_b(p.parameters['model'])}[/bold]", _b(p.parameters["per_rank"]),
              f"[bold]{_b(p.weight_bytes['per_rank'])}[/bold]", _g(p.weight_bytes["per_rank"]), "")
    return t


def kv_table(p: Plan) -> Table:
    t = _table("KV cache per token (exact)", "layer type",
               ("layers", "heads / rank x dim", "B / token / layer / rank", "B / token / rank", "cap (tokens)"))
    for k in p.kv_types:
        if k.kind == "sliding":
            label = f"sliding window {k.window:,}"
        else:
            label = "MLA latent" if k.kind == "mla" else "full attention"
        t.add_row(label, str(k.num_layers), f"{k.heads_per_rank} x {k.elems_per_head}", _b(k.bytes_per_token_rank),
                  _b(k.bytes_per_token_rank * k.num_layers), f"{k.window:,}" if k.window else "-")
    t.add_section()
    kv = p.kv_bytes_per_token
    t.add_row("[bold]all layers[/bold]", str(sum(k.num_layers for k in p.kv_types)), "",
              "", f"[bold]{_b(kv['per_rank'])}[/bold]", "")
    t.caption = (f"per token: {_b(kv['per_rank'])} B on each rank, {_b(kv['total'])} B across the TP group, "
                 f"{_b(kv['model'])} B unsharded")
    return t


def budget_table(p: Plan) -> Table:
    t = _table("Memory account per GPU (GiB = 2^30 bytes)", "term", ("bytes", "GiB"), ("kind",))
    t.add_column("note", overflow="fold", max_width=60)

    def row(term: Term, sign: str = "") -> None:
        t.add_row(f"{sign}{term.label}", _b(term.bytes), _g(term.bytes), _kind(term.kind), term.note)

    row(p.budget_terms[0])
    row(p.budget_terms[1], "= ")
    for term in p.budget_terms[2:]:
        row(term, "- ")
    t.add_section()
    style = "bold green" if p.kv_pool_bytes > 0 else "bold red"
    t.add_row(Text("= KV cache pool", style=style), Text(_b(p.kv_pool_bytes), style=style),
              Text(_g(p.kv_pool_bytes), style=style), _kind("engine"), "")
    t.add_section()
    for term in p.outside_terms:
        row(term, "outside budget: ")
    t.add_row("projected GPU use", _b(p.projected_gpu_bytes), _g(p.projected_gpu_bytes), _kind("estimate"),
              "budget + context + graphs outside it")
    return t


def result_table(p: Plan) -> Table:
    t = _table("KV capacity", "", ("per rank / engine", "total"))
    lay = p.layout
    t.add_row("KV pool (bytes)", _b(p.kv_pool_bytes), _b(p.kv_pool_bytes * p.num_gpus))
    t.add_row("KV pool (GiB)", _g(p.kv_pool_bytes), _g(p.kv_pool_bytes * p.num_gpus))
    t.add_row(f"blocks ({lay.block_bytes:,} B each = {lay.group_size} layer slots x {lay.page_bytes:,} B)",
              _b(p.num_blocks), _b(p.num_blocks * p.dp))
    t.add_row("KV tokens", _b(p.kv_tokens), _b(p.kv_tokens * p.dp))
    t.add_row(f"blocks per request @ {p.max_model_len:,} tokens", _b(p.blocks_per_request), "")
    req = p.kv_bytes_per_request
    t.add_row("KV per request: engine reservation / window-capped (GiB)",
              f"{_g(req['engine_reservation'])} / {_g(req['window_capped'])}", "")
    t.add_row(f"max concurrency @ {p.max_model_len:,} tokens", f"{p.max_concurrency:,.2f}x",
              f"{p.max_concurrency * p.dp:,.2f}x")
    largest = p.largest_max_model_len
    t.add_row("longest max_model_len for one request", "unbounded" if largest is None else _b(largest), "")
    return t


def render_plan(p: Plan, console: Console | None = None) -> None:
    console = console or Console()
    parts: list[Any] = [header(p), weights_table(p), kv_table(p), budget_table(p), result_table(p)]
    if p.notes:
        parts.append(Text("notes:\n" + "\n".join(f"  - {n}" for n in p.notes), style="dim"))
    parts.append(Text("kinds: exact = from the architecture; engine = vLLM layout/rule; estimate = calibrated "
                      "on vLLM 0.19 logs (docs/vram.md); input = from the GPU table", style="dim"))
    console.print(Group(*parts))


def render_measure(m: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    t = _table(f"Measured on {m['device']['name']} (torch.cuda.mem_get_info)", "quantity",
               ("planned bytes", "observed bytes", "missed (GiB)"))
    for row in m["comparison"]:
        planned, observed = row.get("planned"), row.get("observed")
        missed = "" if planned is None or observed is None else f"{gib(observed - planned):+.3f}"
        t.add_row(row["name"], "" if planned is None else _b(planned), "" if observed is None else _b(observed),
                  missed)
    console.print(t)
    if m.get("error"):
        console.print(Text(m["error"], style="bold red"))
