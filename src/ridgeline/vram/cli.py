"""``ridgeline vram``: the Typer command. Register with ``app.command("vram")(vram_command)``.

Exit codes: 0 ok; 1 one request of ``max_model_len`` does not fit; 2 bad input, config or GPU;
3 ``--measure`` unavailable (no CUDA) or an allocation failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from .errors import DoesNotFitError, MeasureError, VramError
from .gpus import known_gpu_names
from .planner import Plan, plan

_GPU_HELP = f"GPU type: one of {', '.join(known_gpu_names())}, or 'auto' to read the CUDA device."


def _emit(record: dict[str, Any], *, as_json: bool, out: Path | None) -> None:
    text = json.dumps(record, indent=2)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    if as_json:
        sys.stdout.write(text + "\n")


def vram_command(
    model: Annotated[str, typer.Argument(help="config.json, a folder holding one, or a shipped config name "
                                              "(Llama-3.1-8B, Llama-3.1-70B, Qwen2.5-7B, Mistral-7B-v0.1, "
                                              "gemma-3-27b-it, DeepSeek-V3).")],
    gpu: Annotated[str, typer.Option("--gpu", help=_GPU_HELP)] = "auto",
    num_gpus: Annotated[int | None, typer.Option("--num-gpus", help="GPUs in total (default: --tp); "
                                                 "more than --tp adds data-parallel replicas.")] = None,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size.")] = 1,
    dtype: Annotated[str, typer.Option("--dtype", help="Weight format: bf16, fp16, fp8, int4-g128.")] = "bf16",
    kv_dtype: Annotated[str, typer.Option("--kv-dtype", help="KV cache format: auto, bf16, fp8.")] = "auto",
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", help="Default: the config's "
                                                      "max_position_embeddings.")] = None,
    gpu_memory_utilization: Annotated[float, typer.Option("--gpu-memory-utilization")] = 0.9,
    block_size: Annotated[int, typer.Option("--block-size")] = 16,
    max_num_batched_tokens: Annotated[int, typer.Option("--max-num-batched-tokens")] = 8192,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", help="Sizes the sampler warm-up "
                                              "(vLLM serve default on H100/H200: 1024).")] = 1024,
    expert_parallel: Annotated[bool, typer.Option("--expert-parallel", help="Split MoE experts across the "
                                                  "TP ranks instead of sharding each expert.")] = False,
    enforce_eager: Annotated[bool, typer.Option("--enforce-eager", help="No CUDA graphs.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON record instead of tables.")] = False,
    measure: Annotated[bool, typer.Option("--measure", help="Allocate the plan on this machine's GPU and "
                                          "compare with torch.cuda.mem_get_info (needs CUDA).")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the JSON record to this file.")] = None,
) -> None:
    """Plan the KV cache for serving MODEL with vLLM: every memory term, per GPU and in total (GiB = 2^30 B)."""
    # Logs and pipes get full-width tables (Rich would cut numbers at 80 columns).
    console = Console() if sys.stdout.isatty() else Console(width=160)
    err = Console(stderr=True)
    try:
        result: Plan = plan(
            model, gpu=gpu, num_gpus=num_gpus, tp=tp, dtype=dtype, kv_dtype=kv_dtype, max_model_len=max_model_len,
            gpu_memory_utilization=gpu_memory_utilization, block_size=block_size,
            max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
            expert_parallel=expert_parallel, enforce_eager=enforce_eager,
        )
    except DoesNotFitError as exc:
        record: dict[str, Any] = {
            "error": {"type": "DoesNotFit", "message": str(exc),
                      "largest_max_model_len": exc.largest_max_model_len},
        }
        if exc.plan is not None:
            record.update(exc.plan.to_dict())
            if not as_json:
                from .render import render_plan

                render_plan(exc.plan, console)
        _emit(record, as_json=as_json, out=out)
        err.print(f"[bold red]error:[/bold red] {exc}")
        raise typer.Exit(1) from None
    except VramError as exc:
        if as_json:
            _emit({"error": {"type": type(exc).__name__, "message": str(exc)}}, as_json=True, out=None)
        err.print(f"[bold red]error:[/bold red] {exc}")
        raise typer.Exit(2) from None

    record = result.to_dict()
    measured = None
    if measure:
        from .measure import measure as run_measure

        try:
            measured = run_measure(result)
        except MeasureError as exc:
            if as_json:
                _emit({"error": {"type": "MeasureError", "message": str(exc)}}, as_json=True, out=None)
            err.print(f"[bold red]error:[/bold red] {exc}")
            raise typer.Exit(3) from None
        record["measure"] = measured
    if not as_json:
        from .render import render_measure, render_plan

        render_plan(result, console)
        if measured is not None:
            render_measure(measured, console)
    _emit(record, as_json=as_json, out=out)
    if out is not None and not as_json:
        console.print(f"wrote {out}")
    if measured is not None and measured.get("error"):
        err.print(f"[bold red]error:[/bold red] {measured['error']}")
        raise typer.Exit(3)


def main() -> None:  # pragma: no cover - convenience entry point: python -m ridgeline.vram.cli
    app = typer.Typer(add_completion=False)
    app.command("vram")(vram_command)
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
