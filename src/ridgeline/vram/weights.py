"""Parameter counts and weight bytes, per tensor-parallel rank, computed from the architecture.

Every tensor is listed as a :class:`Tensor` with its whole-model element count and the element
count one rank holds under vLLM's sharding:

* column-parallel (q/k/v, gate/up, MLA ``q_b``/``kv_b``): output dim split by TP;
* row-parallel (o, down): input dim split by TP, bias kept whole on every rank;
* K/V projections hold ``max(1, num_kv_heads // tp)`` heads per rank (replicated when TP > KV heads);
* vocab-parallel embedding / LM head: vocab padded to a multiple of 64, then split by TP;
* replicated on every rank: norms, MoE router, MLA ``q_a``/``kv_a`` projections, vision embeddings.

Bytes per weight dtype (see docs/vram.md):

* ``bf16``/``fp16``: 2 bytes for everything.
* ``fp8``: quantisable linear weights 1 byte + fp32 scales (one per matrix, or one per
  ``weight_block_size`` block when the config declares block quantisation, as DeepSeek-V3 does);
  embeddings, LM head, norms, router, biases and the vision tower stay 16-bit.
* ``int4-g128``: quantisable linear weights 4 bits + one fp16 scale per 128 input elements per
  output column (+ a packed 4-bit zero point per group when ``int4_zero_point=True``);
  the same tensors as for fp8 stay 16-bit. GPTQ ``g_idx`` (act-order) is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelSpec
from .errors import InputError

WEIGHT_DTYPES = ("bf16", "fp16", "fp8", "int4-g128")
VOCAB_PADDING = 64  # vLLM DEFAULT_VOCAB_PADDING_SIZE
INT4_GROUP = 128


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Tensor:
    """One weight tensor (or ``count`` identical ones) of the model."""

    component: str  # grouping label shown in the output
    name: str
    rows: int  # output features (whole model)
    cols: int  # input features (whole model); 1 for vectors
    rows_local: int  # per rank
    cols_local: int
    count: int = 1  # number of identical tensors in the model
    count_local: int | None = None  # per rank (experts under expert parallelism); None = count
    quantizable: bool = False  # a linear weight the fp8/int4 schemes quantise
    bytes_per_elem: int = 2  # when not quantised (fp32 for e.g. the DeepSeek score bias)

    @property
    def params(self) -> int:
        return self.rows * self.cols * self.count

    @property
    def params_local(self) -> int:
        n = self.count if self.count_local is None else self.count_local
        return self.rows_local * self.cols_local * n

    def bytes_local(self, dtype: str, *, block: tuple[int, int] | None, zero_point: bool) -> int:
        n = self.count if self.count_local is None else self.count_local
        r, c = self.rows_local, self.cols_local
        if not self.quantizable or dtype in ("bf16", "fp16"):
            return r * c * n * self.bytes_per_elem
        if dtype == "fp8":
            scales = cdiv(r, block[0]) * cdiv(c, block[1]) if block else 1
            return n * (r * c + 4 * scales)
        if dtype == "int4-g128":
            groups = cdiv(c, INT4_GROUP)
            per = cdiv(r * c, 2) + 2 * groups * r
            if zero_point:
                per += cdiv(groups * r, 2)
            return n * per
        raise InputError(f"unknown weight dtype {dtype!r}")


@dataclass(frozen=True)
class WeightComponent:
    name: str
    params: int  # whole model
    params_per_rank: int
    bytes_per_rank: int
    quantized: bool
    sharding: str


def _padded_vocab(vocab: int) -> int:
    return cdiv(vocab, VOCAB_PADDING) * VOCAB_PADDING


def check_tp(spec: ModelSpec, tp: int, *, expert_parallel: bool) -> None:
    """Refuse TP splits vLLM refuses, naming the dimension that does not divide."""
    if tp < 1:
        raise InputError("tp must be >= 1")
    if spec.num_heads % tp:
        raise InputError(f"num_attention_heads ({spec.num_heads}) is not divisible by tp ({tp})")
    if spec.mla is None:
        kv = spec.num_kv_heads
        if kv >= tp and kv % tp:
            raise InputError(f"num_key_value_heads ({kv}) is not divisible by tp ({tp})")
        if kv < tp and tp % kv:
            raise InputError(f"tp ({tp}) is not a multiple of num_key_value_heads ({kv}), so KV heads cannot be "
                             "replicated evenly")
    dense = [spec.intermediate_size] if not spec.moe or not all(spec.moe.moe_layers) else []
    for width in dense:
        if width % tp:
            raise InputError(f"intermediate_size ({width}) is not divisible by tp ({tp})")
    if spec.moe:
        if expert_parallel:
            if spec.moe.num_experts % tp:
                raise InputError(f"number of experts ({spec.moe.num_experts}) is not divisible by the expert-parallel "
                                 f"size ({tp})")
        elif spec.moe.expert_intermediate % tp:
            raise InputError(f"moe_intermediate_size ({spec.moe.expert_intermediate}) is not divisible by tp ({tp})")


def kv_heads_per_rank(spec: ModelSpec, tp: int) -> int:
    return max(1, spec.num_kv_heads // tp)


def tensors(spec: ModelSpec, tp: int, *, expert_parallel: bool = False) -> list[Tensor]:
    """All weight tensors of the model with their per-rank shapes."""
    h = spec.hidden_size
    out: list[Tensor] = []
    vp = _padded_vocab(spec.vocab_size)
    vl = cdiv(vp, tp)
    out.append(Tensor("embeddings", "embed_tokens", spec.vocab_size, h, vl, h))
    if not spec.tie_word_embeddings:
        out.append(Tensor("lm_head", "lm_head", spec.vocab_size, h, vl, h))
    out.append(Tensor("norms", "final_norm", h, 1, h, 1))
    L = spec.num_layers
    if spec.mla is not None:
        out += _mla_tensors(spec, tp)
    else:
        hd, nh, nkv = spec.head_dim, spec.num_heads, spec.num_kv_heads
        q, kv = nh * hd, nkv * hd
        ql, kvl = q // tp, kv_heads_per_rank(spec, tp) * hd
        out += [
            Tensor("attention", "q_proj", q, h, ql, h, L, quantizable=True),
            Tensor("attention", "k_proj", kv, h, kvl, h, L, quantizable=True),
            Tensor("attention", "v_proj", kv, h, kvl, h, L, quantizable=True),
            Tensor("attention", "o_proj", h, q, h, ql, L, quantizable=True),
        ]
        if spec.qkv_bias:
            out += [Tensor("attention", "q_bias", q, 1, ql, 1, L), Tensor("attention", "k_bias", kv, 1, kvl, 1, L),
                    Tensor("attention", "v_bias", kv, 1, kvl, 1, L)]
        if spec.o_bias:
            out.append(Tensor("attention", "o_bias", h, 1, h, 1, L))
        if spec.qk_norm:
            out += [Tensor("norms", "q_norm", hd, 1, hd, 1, L), Tensor("norms", "k_norm", hd, 1, hd, 1, L)]
    out.append(Tensor("norms", "layer_norms", h, 1, h, 1, L * spec.norms_per_layer))
    out += _mlp_tensors(spec, tp, expert_parallel=expert_parallel)
    if spec.vision is not None:
        out += _vision_tensors(spec, tp)
    return out


def _mla_tensors(spec: ModelSpec, tp: int) -> list[Tensor]:
    m = spec.mla
    assert m is not None
    h, nh, L = spec.hidden_size, spec.num_heads, spec.num_layers
    nhl = nh // tp
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    latent = m.kv_lora_rank + m.qk_rope_head_dim
    out: list[Tensor] = []
    if m.q_lora_rank:
        out += [
            Tensor("attention (MLA)", "q_a_proj", m.q_lora_rank, h, m.q_lora_rank, h, L, quantizable=True),
            Tensor("norms", "q_a_layernorm", m.q_lora_rank, 1, m.q_lora_rank, 1, L),
            Tensor("attention (MLA)", "q_b_proj", nh * qk, m.q_lora_rank, nhl * qk, m.q_lora_rank, L,
                   quantizable=True),
        ]
    else:
        out.append(Tensor("attention (MLA)", "q_proj", nh * qk, h, nhl * qk, h, L, quantizable=True))
    vd = m.qk_nope_head_dim + m.v_head_dim
    out += [
        Tensor("attention (MLA)", "kv_a_proj_with_mqa", latent, h, latent, h, L, quantizable=True),
        Tensor("norms", "kv_a_layernorm", m.kv_lora_rank, 1, m.kv_lora_rank, 1, L),
        Tensor("attention (MLA)", "kv_b_proj", nh * vd, m.kv_lora_rank, nhl * vd, m.kv_lora_rank, L,
               quantizable=True),
        Tensor("attention (MLA)", "o_proj", h, nh * m.v_head_dim, h, nhl * m.v_head_dim, L, quantizable=True),
    ]
    return out


def _mlp_tensors(spec: ModelSpec, tp: int, *, expert_parallel: bool) -> list[Tensor]:
    h = spec.hidden_size
    moe = spec.moe
    n_moe = sum(moe.moe_layers) if moe else 0
    n_dense = spec.num_layers - n_moe
    out: list[Tensor] = []
    if n_dense:
        i, il = spec.intermediate_size, spec.intermediate_size // tp
        comp = "dense MLP" if moe is None else f"dense MLP ({n_dense} layers)"
        out += [
            Tensor(comp, "gate_proj", i, h, il, h, n_dense, quantizable=True),
            Tensor(comp, "up_proj", i, h, il, h, n_dense, quantizable=True),
            Tensor(comp, "down_proj", h, i, h, il, n_dense, quantizable=True),
        ]
        if spec.mlp_bias:
            out += [Tensor(comp, "gate_bias", i, 1, il, 1, n_dense), Tensor(comp, "up_bias", i, 1, il, 1, n_dense),
                    Tensor(comp, "down_bias", h, 1, h, 1, n_dense)]
    if moe and n_moe:
        e = moe.num_experts
        ie = moe.expert_intermediate
        if expert_parallel:
            iel, n_local = ie, n_moe * (e // tp)
            comp = f"routed experts ({e} x {n_moe} layers, EP={tp})"
        else:
            iel, n_local = ie // tp, n_moe * e
            comp = f"routed experts ({e} x {n_moe} layers)"
        n_all = n_moe * e
        out += [
            Tensor(comp, "expert gate_proj", ie, h, iel, h, n_all, n_local, quantizable=True),
            Tensor(comp, "expert up_proj", ie, h, iel, h, n_all, n_local, quantizable=True),
            Tensor(comp, "expert down_proj", h, ie, h, iel, n_all, n_local, quantizable=True),
            Tensor("MoE router", "gate", e, h, e, h, n_moe),
        ]
        if moe.has_score_bias:
            out.append(Tensor("MoE router", "e_score_correction_bias", e, 1, e, 1, n_moe, bytes_per_elem=4))
        if moe.shared_intermediate:
            s, sl = moe.shared_intermediate, moe.shared_intermediate // tp
            comp = "shared experts"
            out += [
                Tensor(comp, "shared gate_proj", s, h, sl, h, n_moe, quantizable=True),
                Tensor(comp, "shared up_proj", s, h, sl, h, n_moe, quantizable=True),
                Tensor(comp, "shared down_proj", h, s, h, sl, n_moe, quantizable=True),
            ]
    return out


def _vision_tensors(spec: ModelSpec, tp: int) -> list[Tensor]:
    v = spec.vision
    assert v is not None
    hv, iv, L = v.hidden, v.intermediate, v.layers
    comp = "vision tower (SigLIP)"
    patches = (v.image_size // v.patch) ** 2
    hl = hv // tp if hv % tp == 0 else cdiv(hv, tp)
    il = iv // tp if iv % tp == 0 else cdiv(iv, tp)
    return [
        Tensor(comp, "patch_embedding", hv, v.channels * v.patch * v.patch, hv, v.channels * v.patch * v.patch),
        Tensor(comp, "patch_embedding_bias", hv, 1, hv, 1),
        Tensor(comp, "position_embedding", patches, hv, patches, hv),
        Tensor(comp, "q/k/v_proj", hv, hv, hl, hv, 3 * L),
        Tensor(comp, "q/k/v_bias", hv, 1, hl, 1, 3 * L),
        Tensor(comp, "out_proj", hv, hv, hv, hl, L),
        Tensor(comp, "out_bias", hv, 1, hv, 1, L),
        Tensor(comp, "fc1", iv, hv, il, hv, L),
        Tensor(comp, "fc1_bias", iv, 1, il, 1, L),
        Tensor(comp, "fc2", hv, iv, hv, il, L),
        Tensor(comp, "fc2_bias", hv, 1, hv, 1, L),
        Tensor(comp, "layer_norms (w+b)", hv, 1, hv, 1, 4 * L + 2),
        Tensor("multimodal projector", "mm_input_projection", v.projector_out, hv, v.projector_out, hv),
        Tensor("multimodal projector", "mm_soft_emb_norm", hv, 1, hv, 1),
    ]


def weight_components(spec: ModelSpec, tp: int, dtype: str, *, expert_parallel: bool = False,
                      int4_zero_point: bool = False) -> list[WeightComponent]:
    """Group :func:`tensors` into the components shown in the plan, with per-rank bytes."""
    if dtype not in WEIGHT_DTYPES:
        raise InputError(f"dtype must be one of {', '.join(WEIGHT_DTYPES)}, got {dtype!r}")
    block = spec.quant_block if dtype == "fp8" else None
    groups: dict[str, list[Tensor]] = {}
    for t in tensors(spec, tp, expert_parallel=expert_parallel):
        groups.setdefault(t.component, []).append(t)
    comps = []
    for name, ts in groups.items():
        quant = dtype in ("fp8", "int4-g128") and any(t.quantizable for t in ts)
        replicated = all(t.params_local == t.params for t in ts) and tp > 1
        sharded = any(t.params_local != t.params for t in ts)
        sharding = "replicated" if replicated else ("sharded" if sharded else "-")
        comps.append(WeightComponent(
            name=name,
            params=sum(t.params for t in ts),
            params_per_rank=sum(t.params_local for t in ts),
            bytes_per_rank=sum(t.bytes_local(dtype, block=block, zero_point=int4_zero_point) for t in ts),
            quantized=quant,
            sharding=sharding,
        ))
    return comps
