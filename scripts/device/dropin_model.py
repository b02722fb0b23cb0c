"""The drop-in test on a GPU: a Hugging Face Llama built from a config (random weights, no download), unpatched,
patched by `ridgeline.patch` and patched by Liger, each in its own process: the loss and gradients against the
unpatched model, and the measured training-step time and peak memory, written as one JSON record.

    python scripts/device/dropin_model.py --out $OUT/h200-dropin-llama.json [--steps 10]

A training step = forward with labels + backward (+ zero_grad); timed with CUDA events after warm-up steps.
Correctness runs the same model in fp32 (so the comparison measures the kernels, not bf16 rounding) and bf16.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

# A ~1B-parameter Llama-3-shaped model (Llama-3.2-1B's dimensions), 8192 tokens a step.
TIMED = dict(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
             num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rms_norm_eps=1e-5,
             rope_theta=500000.0, hidden_act="silu", tie_word_embeddings=False)
BATCH, SEQ = 4, 2048
SMALL = dict(TIMED, vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=2,
             num_attention_heads=8, num_key_value_heads=2)
VARIANTS = ("unpatched", "ridgeline", "liger")


def _model(cfg: dict, dtype: torch.dtype, seed: int = 0):
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(**cfg, attn_implementation="sdpa")
    model = transformers.AutoModelForCausalLM.from_config(config).to(device="cuda", dtype=dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.2 * torch.randn_like(p))
    return model


def _batch(vocab: int, b: int, s: int):
    g = torch.Generator(device="cuda").manual_seed(1)
    ids = torch.randint(0, vocab, (b, s), device="cuda", generator=g)
    labels = ids.clone()
    labels[:, :7] = -100
    return ids, labels


def _apply(variant: str, model) -> dict:
    if variant == "ridgeline":
        import ridgeline

        handle = ridgeline.patch(model)
        return {"swapped": handle.swapped, "skipped": handle.skipped}
    if variant == "liger":
        from liger_kernel.transformers import apply_liger_kernel_to_llama

        # The same four swaps as ours (not Liger's fused linear + cross-entropy, a different algorithm).
        apply_liger_kernel_to_llama(rope=True, rms_norm=True, swiglu=True, cross_entropy=True,
                                    fused_linear_cross_entropy=False, model=model)
        return {"swapped": "rope, rms_norm, swiglu, cross_entropy"}
    return {}


def _step(model, ids, labels):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    return out.loss


def _grads(model) -> dict[str, torch.Tensor]:
    return {n: p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}


def run_variant(variant: str, steps: int, scratch: Path) -> dict:
    res: dict = {"variant": variant}
    # Correctness: fp32 and bf16 small models; gradients saved for the parent to compare.
    for dtype in (torch.float32, torch.bfloat16):
        model = _model(SMALL, dtype)
        res.setdefault("patch", _apply(variant, model))
        ids, labels = _batch(SMALL["vocab_size"], 2, 256)
        loss = _step(model, ids, labels)
        torch.save({"loss": loss.detach().float().cpu(), "grads": _grads(model)},
                   scratch / f"{variant}-{str(dtype)[6:]}.pt")
        del model
    torch.cuda.empty_cache()
    # Timing and memory: the ~1B model in bf16.
    model = _model(TIMED, torch.bfloat16)
    _apply(variant, model)
    ids, labels = _batch(TIMED["vocab_size"], BATCH, SEQ)
    for _ in range(3):
        _step(model, ids, labels)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base_mem = torch.cuda.memory_allocated()
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = _step(model, ids, labels)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    res.update(step_ms_median=statistics.median(times), step_ms_samples=times,
               peak_bytes=torch.cuda.max_memory_allocated(), resident_bytes_before_step=base_mem,
               timed_loss=float(loss))
    return res


def _compare(scratch: Path, variant: str) -> dict:
    out = {}
    for dt in ("float32", "bfloat16"):
        ref, got = torch.load(scratch / f"unpatched-{dt}.pt"), torch.load(scratch / f"{variant}-{dt}.pt")
        rel = {n: float((got["grads"][n] - g).norm() / g.norm().clamp_min(1e-30)) for n, g in ref["grads"].items()}
        worst = max(rel, key=rel.get)
        out[dt] = {"loss_ref": float(ref["loss"]), "loss": float(got["loss"]),
                   "loss_abs_diff": abs(float(got["loss"]) - float(ref["loss"])),
                   "grad_rel_l2_max": rel[worst], "grad_rel_l2_worst_param": worst,
                   "grad_rel_l2_median": statistics.median(rel.values())}
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.variant:  # child: one variant, result as JSON on the last line
        print(json.dumps(run_variant(args.variant, args.steps, Path(args.scratch))))
        return 0
    from ridgeline.records.env import capture_env

    scratch = Path(tempfile.mkdtemp(prefix="dropin-"))  # gradients of each variant (not part of the record)
    import transformers

    record = {"kind": "dropin-model", "env": capture_env(sys.argv), "transformers": transformers.__version__,
              "model": {"timed": TIMED, "batch": BATCH, "seq": SEQ, "dtype": "bf16", "correctness": SMALL,
                        "correctness_tokens": "2 x 256"},
              "step": "forward with labels (causal-LM loss) + backward, zero_grad(set_to_none); CUDA events",
              "variants": {}}
    for variant in VARIANTS:
        t0 = time.time()
        proc = subprocess.run([sys.executable, __file__, "--out", args.out, "--steps", str(args.steps),
                               "--variant", variant, "--scratch", str(scratch)], capture_output=True, text=True,
                              env=dict(os.environ))
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        if proc.returncode or not lines:
            record["variants"][variant] = {"error": (proc.stderr or proc.stdout)[-3000:]}
        else:
            record["variants"][variant] = json.loads(lines[-1])
        record["variants"][variant]["wall_s"] = round(time.time() - t0, 1)
        Path(args.out).write_text(json.dumps(record, indent=1))
    for variant in VARIANTS[1:]:
        if "error" not in record["variants"][variant] and "error" not in record["variants"]["unpatched"]:
            record["variants"][variant]["vs_unpatched"] = _compare(scratch, variant)
    Path(args.out).write_text(json.dumps(record, indent=1))
    base = record["variants"]["unpatched"]
    print(f"{'variant':<10} {'step ms':>9} {'speedup':>8} {'peak GiB':>9}  fp32 loss diff / grad rel  bf16")
    for variant, r in record["variants"].items():
        if "error" in r:
            print(f"{variant:<10} ERROR {r['error'].splitlines()[-1] if r['error'] else ''}")
            continue
        sp = base.get("step_ms_median", float("nan")) / r["step_ms_median"]
        cmp = r.get("vs_unpatched", {})
        tail = "  ".join(f"{c['loss_abs_diff']:.2e}/{c['grad_rel_l2_max']:.2e}" for c in cmp.values())
        print(f"{variant:<10} {r['step_ms_median']:9.1f} {sp:8.3f} {r['peak_bytes'] / 2**30:9.2f}  {tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
