"""The terms that are estimates, not exact: activation peak, non-torch memory, CUDA graphs, context.

They model vLLM V1's start-up profile (``gpu_worker.determine_available_memory``): the engine runs
one forward pass of ``max_num_batched_tokens`` tokens plus a dummy sampler pass over
``min(max_num_seqs, max_num_batched_tokens)`` requests, and subtracts the torch peak increase and
the non-torch increase from ``total x gpu_memory_utilization``. The constants are calibrated on
vLLM 0.19.0 logs on H100 (docs/vram.md lists the lines) and are marked ``estimate`` wherever they
appear in the output. Expect them to be off by a few hundred MiB on other versions or models.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelSpec
from .weights import cdiv, kv_heads_per_rank

MiB = 1 << 20
GiB = 1 << 30

#: Bytes per logit in the dummy sampler pass: bf16 logits (2) + fp32 copy (4) + fp32 probabilities (4)
#: + fp32 exponential noise for sampling (4) + ~1 of masks and indices. Fitted: it reproduces the
#: torch peak increase vLLM 0.19 logs for Llama-3.1-8B (1.89 GiB) and Qwen2.5-7B (2.21 GiB) at
#: max_num_seqs=1024 to within 1%.
SAMPLER_BYTES_PER_LOGIT = 15

#: Non-torch memory increase during profiling (cuBLAS/NCCL workspaces, custom all-reduce buffers).
#: vLLM 0.19 on H100: 0.24-0.27 GiB at TP=1, 2.06-2.17 GiB per GPU at TP=2 and 4.
NON_TORCH_TP1 = int(0.25 * GiB)
NON_TORCH_TP_MULTI = int(2.1 * GiB)

#: CUDA context and runtime, already resident when vLLM takes its first memory snapshot and therefore
#: outside the utilization budget (vLLM 0.19 log: 'worker init memory snapshot ... cuda_memory=0.51GiB').
CUDA_CONTEXT = int(0.51 * GiB)

#: CUDA graphs: vLLM 0.19 captures 51 batch sizes (1..512) in both PIECEWISE and FULL modes. Its own
#: estimate for Llama-3.1-8B was 138 MiB + 50 x 6 MiB (piecewise) and 260 MiB + 50 x 6 MiB (full),
#: 0.84 GiB total; for gemma-3-27b (62 layers) 1.05 GiB with 12 MiB per piecewise graph.
CUDA_GRAPH_SIZES = 51
CUDA_GRAPH_PER_GRAPH = 6 * MiB
CUDA_GRAPH_FIRST_CAPTURES = 256 * MiB


@dataclass(frozen=True)
class ActivationEstimate:
    forward_bytes: int
    sampler_bytes: int
    tokens: int
    requests: int
    forward_width: int  # elements per token in the widest sublayer
    widest: str

    @property
    def peak_bytes(self) -> int:
        return max(self.forward_bytes, self.sampler_bytes)

    @property
    def dominant(self) -> str:
        return "sampler" if self.sampler_bytes >= self.forward_bytes else f"forward ({self.widest})"


def activation_peak(spec: ModelSpec, tp: int, *, max_num_batched_tokens: int, max_num_seqs: int,
                    act_bytes: int = 2, padded_vocab: int | None = None) -> ActivationEstimate:
    """Torch peak increase during vLLM's profile run (estimate).

    forward: ``T x act_bytes x width`` where width is the widest sublayer's live set per token:
    residual + hidden + normed input + output (``4h``) plus the sublayer's intermediates —
    attention ``2q + 2kv`` (per rank), dense MLP ``3 x intermediate / tp`` (gate_up + act),
    MoE ``top_k x (3 x expert_intermediate_per_rank + h)`` (fused-MoE caches) + router logits,
    MLA prefill ``heads_per_rank x (2 x qk_head + qk_nope + 2 x v_head) + latent``.
    sampler: the hidden states of the batch (``T x h``) plus
    ``min(max_num_seqs, T) x vocab x SAMPLER_BYTES_PER_LOGIT`` (logits are gathered to full vocab
    on every rank, so this term does not shrink with TP).
    """
    T = max_num_batched_tokens
    h = spec.hidden_size
    base = 4 * h
    widths: dict[str, int] = {}
    if spec.mla is not None:
        m = spec.mla
        nhl = spec.num_heads // tp
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        widths["MLA attention"] = base + nhl * (2 * qk + m.qk_nope_head_dim + 2 * m.v_head_dim) + \
            m.kv_lora_rank + m.qk_rope_head_dim
    else:
        q = spec.num_heads // tp * spec.head_dim
        kv = kv_heads_per_rank(spec, tp) * spec.head_dim
        widths["attention"] = base + 2 * q + 2 * kv
    moe = spec.moe
    if moe is None or not all(moe.moe_layers):
        widths["dense MLP"] = base + 3 * spec.intermediate_size // tp
    if moe is not None and any(moe.moe_layers):
        iel = moe.expert_intermediate // tp
        widths["MoE"] = base + moe.top_k * (3 * iel + h) + 2 * moe.num_experts + 3 * moe.shared_intermediate // tp
    widest = max(widths, key=lambda k: widths[k])
    width = widths[widest]
    vocab = padded_vocab or spec.vocab_size
    requests = min(max_num_seqs, T)
    return ActivationEstimate(
        forward_bytes=T * act_bytes * width,
        sampler_bytes=T * h * act_bytes + requests * vocab * SAMPLER_BYTES_PER_LOGIT,
        tokens=T,
        requests=requests,
        forward_width=width,
        widest=widest,
    )


def non_torch_bytes(tp: int) -> int:
    """Non-torch memory increase per GPU during profiling (estimate)."""
    return NON_TORCH_TP1 if tp == 1 else NON_TORCH_TP_MULTI


def cuda_graph_bytes(spec: ModelSpec, *, enforce_eager: bool) -> int:
    """CUDA graph pool per GPU (estimate); 0 with enforce_eager."""
    if enforce_eager:
        return 0
    per_graph = CUDA_GRAPH_PER_GRAPH * (1 + cdiv(spec.num_layers, 32))
    return CUDA_GRAPH_SIZES * per_graph + CUDA_GRAPH_FIRST_CAPTURES
