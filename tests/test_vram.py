"""Tests for ridgeline.vram (CPU only). Exact terms are pinned to the byte / parameter; the estimates are
checked against published vLLM 0.19.0 start-up logs (sources in docs/vram.md)."""

from __future__ import annotations

import json
import re

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from ridgeline.vram import (
    ConfigError,
    DoesNotFitError,
    GiB,
    GpuError,
    InputError,
    fmt_gib,
    gib,
    load_config,
    load_model,
    lookup_gpu,
    plan,
    shipped_configs,
)
from ridgeline.vram.cli import vram_command
from ridgeline.vram.measure import cuda_available
from ridgeline.vram.weights import weight_components

MiB = 1 << 20

# --------------------------------------------------------------------------------------------
# exact terms: parameter counts and KV bytes per token for every shipped config
# --------------------------------------------------------------------------------------------

PUBLISHED_PARAMETERS = {
    "Llama-3.1-8B": 8_030_261_248,
    "Llama-3.1-70B": 70_553_706_496,
    "Qwen2.5-7B": 7_615_616_512,
    "Mistral-7B-v0.1": 7_241_732_096,
    "gemma-3-27b-it": 27_432_406_640,  # text 27,009,346,304 + SigLIP tower + projector
    "DeepSeek-V3": 671_026_419_200,  # main model; the MTP module is not counted
}

KV_BYTES_PER_TOKEN_BF16 = {
    "Llama-3.1-8B": 131_072,  # 32 layers x 2 x 8 heads x 128 x 2 B
    "Llama-3.1-70B": 327_680,  # 80 x 2 x 8 x 128 x 2
    "Qwen2.5-7B": 57_344,  # 28 x 2 x 4 x 128 x 2
    "Mistral-7B-v0.1": 131_072,  # 32 x 2 x 8 x 128 x 2
    "gemma-3-27b-it": 507_904,  # 62 x 2 x 16 x 128 x 2 (uncapped)
    "DeepSeek-V3": 70_272,  # 61 x (512 + 64) x 2, one latent per layer
}


def params_of(name: str) -> int:
    return sum(c.params for c in weight_components(load_model(name), 1, "bf16"))


def test_every_shipped_config_is_pinned():
    assert set(shipped_configs()) == set(PUBLISHED_PARAMETERS)
    for name, path in shipped_configs().items():
        assert json.loads(path.read_text())["_ridgeline"]["published_parameters"] == PUBLISHED_PARAMETERS[name]


@pytest.mark.parametrize("name,count", PUBLISHED_PARAMETERS.items())
def test_parameter_counts_are_exact(name, count):
    assert params_of(name) == count


def test_gemma3_text_and_vision_split():
    comps = {c.name: c.params for c in weight_components(load_model("gemma-3-27b-it"), 1, "bf16")}
    text = sum(v for k, v in comps.items() if not k.startswith(("vision", "multimodal")))
    assert text == 27_009_346_304
    assert comps["vision tower (SigLIP)"] == 416_866_032
    assert comps["multimodal projector"] == 1152 * 5376 + 1152


def test_deepseek_v3_structure():
    spec = load_model("DeepSeek-V3")
    assert spec.moe is not None and spec.mla is not None
    assert sum(spec.moe.moe_layers) == 58 and spec.moe.moe_layers[:3] == (False, False, False)
    comps = {c.name: c.params for c in weight_components(spec, 1, "bf16")}
    assert comps["shared experts"] == 58 * 3 * 7168 * 2048
    assert comps["MoE router"] == 58 * (256 * 7168 + 256)  # gate + e_score_correction_bias
    assert comps["dense MLP (3 layers)"] == 3 * 3 * 7168 * 18432
    assert any("MTP" in n for n in spec.notes)


@pytest.mark.parametrize("name,per_token", KV_BYTES_PER_TOKEN_BF16.items())
def test_kv_bytes_per_token_are_exact(name, per_token):
    p = plan(name, gpu="B200", num_gpus=8, tp=8 if name in ("DeepSeek-V3", "Llama-3.1-70B") else 1,
             dtype="fp8" if name == "DeepSeek-V3" else "bf16", max_model_len=4096)
    assert p.kv_bytes_per_token["model"] == per_token


def test_llama_8b_single_gpu_terms():
    p = plan("Llama-3.1-8B", gpu="H100", max_model_len=8192)
    assert p.parameters == {"per_rank": 8_030_261_248, "total": 8_030_261_248, "model": 8_030_261_248}
    assert p.weight_bytes["per_rank"] == 2 * 8_030_261_248
    assert p.kv_bytes_per_token == {"per_rank": 131_072, "total": 131_072, "model": 131_072}
    assert p.term("rotary_cache").bytes == 131_072 * 128 * 2  # llama3 rope: max_position x head_dim, bf16
    assert p.kv_tokens == p.num_blocks * 16
    assert p.num_blocks == p.kv_pool_bytes // (16 * 131_072)
    assert p.max_concurrency == pytest.approx(p.num_blocks / (8192 // 16))


# --------------------------------------------------------------------------------------------
# tensor parallelism: splitting and replication
# --------------------------------------------------------------------------------------------


def test_tp_splits_kv_heads_and_weights():
    p = plan("Llama-3.1-70B", gpu="H100", num_gpus=8, tp=8, max_model_len=8192)
    assert p.kv_types[0].heads_per_rank == 1
    assert p.kv_bytes_per_token == {"per_rank": 40_960, "total": 327_680, "model": 327_680}
    p2 = plan("Llama-3.1-8B", gpu="H100", tp=2, max_model_len=8192)
    norms = 65 * 4096  # 2 per layer + final, replicated on every rank
    assert p2.parameters["per_rank"] == (8_030_261_248 - norms) // 2 + norms
    assert p2.parameters["total"] == 2 * p2.parameters["per_rank"]
    assert p2.kv_bytes_per_token == {"per_rank": 65_536, "total": 131_072, "model": 131_072}


def test_tp_beyond_kv_heads_replicates():
    p = plan("Llama-3.1-70B", gpu="H100", num_gpus=16, tp=16, max_model_len=8192)
    assert p.kv_types[0].heads_per_rank == 1  # 8 KV heads over 16 ranks: each head on 2 ranks
    assert p.kv_bytes_per_token == {"per_rank": 40_960, "total": 655_360, "model": 327_680}
    assert any("replicated" in n for n in p.notes)


def test_mla_latent_is_replicated_on_every_rank():
    p = plan("DeepSeek-V3", gpu="H200", num_gpus=8, tp=8, dtype="fp8", max_model_len=32768)
    assert p.kv_bytes_per_token == {"per_rank": 70_272, "total": 8 * 70_272, "model": 70_272}
    # per-rank parameters, recomputed independently: q_a/kv_a projections and norms replicated
    attn = 7168 * 1536 + 1536 + 1536 * 16 * 192 + 7168 * 576 + 512 + 512 * 16 * 256 + 16 * 128 * 7168
    moe = 256 * 3 * 7168 * 256 + 256 * 7168 + 256 + 3 * 7168 * 256
    expected = 2 * 16160 * 7168 + 7168 + 61 * (attn + 2 * 7168) + 3 * 3 * 7168 * 2304 + 58 * moe
    assert p.parameters["per_rank"] == expected


def test_expert_parallel_keeps_experts_whole():
    tp = plan("DeepSeek-V3", gpu="H200", tp=8, dtype="fp8", max_model_len=32768)
    ep = plan("DeepSeek-V3", gpu="H200", tp=8, dtype="fp8", max_model_len=32768, expert_parallel=True)
    assert ep.parameters["per_rank"] == tp.parameters["per_rank"]  # same amount, different cut
    routed = next(c for c in ep.weight_components if c.name.startswith("routed experts"))
    assert routed.params_per_rank == 58 * 32 * 3 * 7168 * 2048


@pytest.mark.parametrize("model,tp,field", [("Qwen2.5-7B", 8, "num_attention_heads"),
                                              ("Llama-3.1-8B", 3, "num_attention_heads"),
                                              ("Qwen2.5-7B", 14, "num_key_value_heads")])
def test_invalid_tp_is_refused(model, tp, field):
    with pytest.raises(InputError, match=field):
        plan(model, gpu="H100", tp=tp, max_model_len=4096)


def test_num_gpus_adds_data_parallel_replicas():
    p = plan("Llama-3.1-8B", gpu="H100", num_gpus=4, tp=2, max_model_len=8192)
    d = p.to_dict()
    assert d["parallel"] == {"tp": 2, "dp": 2, "num_gpus": 4, "expert_parallel": False}
    assert d["kv_tokens"]["total"] == 2 * d["kv_tokens"]["per_rank"]
    assert d["kv_pool_bytes"]["total"] == 4 * d["kv_pool_bytes"]["per_rank"]
    with pytest.raises(InputError, match="multiple of tp"):
        plan("Llama-3.1-8B", gpu="H100", num_gpus=3, tp=2)


# --------------------------------------------------------------------------------------------
# sliding windows and hybrid layouts
# --------------------------------------------------------------------------------------------


def test_mistral_sliding_window_caps_each_request():
    kw = dict(gpu="H100", max_model_len=32768, max_num_batched_tokens=512)
    p = plan("Mistral-7B-v0.1", **kw)
    assert p.kv_types[0].kind == "sliding" and p.kv_types[0].window == 4096
    # vLLM SlidingWindowSpec: cdiv(min(W - 1 + chunk, L), block) + 1 blocks per layer
    assert p.blocks_per_request == -(-(4095 + 512) // 16) + 1 == 289
    assert p.kv_bytes_per_request["engine_reservation"] == 32 * 289 * 16 * 4096
    assert p.kv_bytes_per_request["window_capped"] == 32 * 4096 * 4096
    assert p.largest_max_model_len is None  # only sliding layers: a request's KV stops growing
    full = plan("Mistral-7B-v0.1", disable_sliding_window=True, **kw)
    assert full.kv_bytes_per_request["engine_reservation"] == 32 * 32768 * 4096
    assert p.max_concurrency > 7 * full.max_concurrency


def test_gemma3_hybrid_layers_and_groups():
    p = plan("gemma-3-27b-it", gpu="H100", max_model_len=131072, max_num_batched_tokens=512)
    kinds = {(t.kind, t.window): t.num_layers for t in p.kv_types}
    assert kinds == {("full", None): 10, ("sliding", 1024): 52}
    assert p.layout.group_size == 10 and p.layout.num_groups == 7 and p.layout.padding_layers == 8
    assert p.blocks_per_request == 131072 // 16 + 6 * (-(-(1023 + 512) // 16) + 1)
    assert p.kv_bytes_per_request["window_capped"] == (10 * 131072 + 52 * 1024) * 8192
    assert p.kv_tokens == p.num_blocks // 7 * 16
    d = p.to_dict()
    assert [t["cap_tokens"] for t in d["kv_layer_types"]] == [None, 1024]


def test_sparse_upstream_gemma3_config_uses_recorded_defaults():
    cfg, _, _ = load_config("gemma-3-27b-it")
    sparse = {k: v for k, v in cfg["text_config"].items()
              if k not in ("vocab_size", "max_position_embeddings", "sliding_window_pattern", "tie_word_embeddings")}
    spec = load_model({**cfg, "text_config": sparse})
    assert spec.vocab_size == 262208 and spec.tie_word_embeddings is True
    assert any("vocab_size=262208" in d for d in spec.defaults_applied)
    assert any("sliding_window_pattern=6" in d for d in spec.defaults_applied)
    assert sum(c.params for c in weight_components(spec, 1, "bf16")) == 27_432_406_640
    p = plan(spec, gpu="H100", max_model_len=8192)
    assert any(n.startswith("defaulted:") for n in p.notes)


# --------------------------------------------------------------------------------------------
# formats: fp8 KV, fp8 and int4 weights
# --------------------------------------------------------------------------------------------


def test_fp8_kv_is_one_byte():
    bf = plan("Llama-3.1-8B", gpu="H100", max_model_len=8192)
    f8 = plan("Llama-3.1-8B", gpu="H100", max_model_len=8192, kv_dtype="fp8")
    assert f8.kv_bytes_per_token["per_rank"] == 65_536
    assert abs(f8.kv_tokens - 2 * bf.kv_tokens) <= 16
    ds = plan("DeepSeek-V3", gpu="H200", tp=8, dtype="fp8", kv_dtype="fp8", max_model_len=32768)
    assert ds.kv_bytes_per_token["per_rank"] == 61 * 576


def test_int4_g128_weights():
    linear = 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336)  # q, o, k, v, gate, up, down
    assert linear == 6_979_321_856
    scales = 32 * 2 * (32 * 4096 * 2 + 32 * 1024 * 2 + 2 * 32 * 14336 + 112 * 4096)  # fp16, per 128 inputs
    sixteen_bit = 2 * (2 * 128256 * 4096 + 65 * 4096)  # embeddings, LM head, norms
    p = plan("Llama-3.1-8B", gpu="L40S", dtype="int4-g128", max_model_len=8192)
    assert p.weight_bytes["per_rank"] == linear // 2 + scales + sixteen_bit == 5_700_591_616
    z = plan("Llama-3.1-8B", gpu="L40S", dtype="int4-g128", max_model_len=8192, int4_zero_point=True)
    assert z.weight_bytes["per_rank"] - p.weight_bytes["per_rank"] == linear // 128 // 2


def test_fp8_weights_keep_embeddings_16bit():
    p = plan("Llama-3.1-8B", gpu="H100", dtype="fp8", max_model_len=8192)
    per_tensor_scales = 32 * 7 * 4
    assert p.weight_bytes["per_rank"] == 6_979_321_856 + per_tensor_scales + 2 * (2 * 128256 * 4096 + 65 * 4096)
    ds = plan("DeepSeek-V3", gpu="H200", tp=8, dtype="fp8", max_model_len=32768)
    assert any(c.quantized for c in ds.weight_components)
    assert ds.weight_bytes["model"] < 700 * 10**9  # ~1 byte per parameter plus 128x128 block scales


# --------------------------------------------------------------------------------------------
# GiB math and the GPU table
# --------------------------------------------------------------------------------------------


def test_gib_math_and_gpu_table():
    assert GiB == 2**30 and gib(2**30) == 1.0 and fmt_gib(3 * 2**29) == "1.50 GiB"
    h200 = lookup_gpu("H200")
    assert h200.total_bytes == 150_109_880_320 and round(h200.total_bytes / MiB) == 143156
    assert h200.nvidia_smi_mib == 143771  # what nvidia-smi prints; torch reports less
    assert lookup_gpu("h100-sxm").total_bytes == 81089 * MiB
    assert round(gib(lookup_gpu("H100").total_bytes), 2) == 79.19  # vLLM 0.19 log: total_memory=79.19GiB
    p = plan("Llama-3.1-8B", gpu="H200", max_model_len=8192, gpu_memory_utilization=0.9)
    assert p.engine_budget_bytes == int(150_109_880_320 * 0.9)
    with pytest.raises(GpuError, match="unknown GPU"):
        lookup_gpu("H300")


@settings(max_examples=25, deadline=None)
@given(util=st.floats(0.5, 0.99), delta=st.floats(0.001, 0.05))
def test_more_utilization_never_means_fewer_tokens(util, delta):
    lo = plan("Qwen2.5-7B", gpu="H100", max_model_len=4096, gpu_memory_utilization=util)
    hi = plan("Qwen2.5-7B", gpu="H100", max_model_len=4096, gpu_memory_utilization=min(util + delta, 1.0))
    assert hi.kv_tokens >= lo.kv_tokens and hi.kv_pool_bytes >= lo.kv_pool_bytes


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


def test_missing_field_is_named():
    cfg, _, _ = load_config("Llama-3.1-8B")
    del cfg["hidden_size"]
    with pytest.raises(ConfigError, match="'hidden_size'") as info:
        load_model(cfg)
    assert info.value.field == "hidden_size"
    ds, _, _ = load_config("DeepSeek-V3")
    del ds["kv_lora_rank"]
    with pytest.raises(ConfigError, match="'kv_lora_rank'"):
        load_model(ds)


def test_unknown_architecture_and_model_are_refused():
    with pytest.raises(ConfigError, match="model_type 'mamba' is not supported"):
        load_model({"model_type": "mamba", "hidden_size": 8})
    with pytest.raises(ConfigError, match="'model_type' is missing"):
        load_model({"hidden_size": 8})
    with pytest.raises(ConfigError, match="not a shipped config"):
        load_model("no-such-model-7b")


def test_config_file_and_folder(tmp_path):
    cfg, _, _ = load_config("Qwen2.5-7B")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert load_model(tmp_path).num_kv_heads == 4
    assert load_model(tmp_path / "config.json").vocab_size == 152064
    with pytest.raises(ConfigError, match="no config.json"):
        load_model(tmp_path / "..")


def test_bad_inputs():
    with pytest.raises(InputError, match="dtype"):
        plan("Llama-3.1-8B", gpu="H100", dtype="int3")
    with pytest.raises(InputError, match="gpu_memory_utilization"):
        plan("Llama-3.1-8B", gpu="H100", gpu_memory_utilization=1.5)


def test_weights_that_do_not_fit():
    with pytest.raises(DoesNotFitError, match="largest max_model_len that fits is 0") as info:
        plan("Llama-3.1-70B", gpu="H100", max_model_len=8192)
    assert info.value.largest_max_model_len == 0
    assert info.value.plan is not None and info.value.plan.fits is False


def test_max_model_len_that_does_not_fit_names_the_largest():
    with pytest.raises(DoesNotFitError) as info:
        plan("Llama-3.1-8B", gpu="RTX4090")  # default max_model_len = 131072
    largest = info.value.largest_max_model_len
    assert largest is not None and 0 < largest < 131072
    assert f"{largest:,}" in str(info.value)
    assert plan("Llama-3.1-8B", gpu="RTX4090", max_model_len=largest).fits
    with pytest.raises(DoesNotFitError):
        plan("Llama-3.1-8B", gpu="RTX4090", max_model_len=largest + 1)


@pytest.mark.skipif(cuda_available(), reason="this machine has CUDA")
def test_auto_gpu_without_cuda_is_a_clear_error():
    with pytest.raises(GpuError, match="pass --gpu NAME"):
        plan("Llama-3.1-8B")


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("vram")(vram_command)
    app.command("noop")(lambda: None)  # two commands so the subcommand name is required, as in the main CLI
    return app


def test_cli_table():
    res = runner.invoke(_app(), ["vram", "gemma-3-27b-it", "--gpu", "H100", "--max-model-len", "8192"],
                        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    for text in ("KV cache pool", "GiB", "sliding window 1,024", "estimate", "max concurrency"):
        assert text in res.output
    assert not re.search(r"\d GB\b", res.output)  # sizes are GiB only


def test_cli_json_and_out(tmp_path):
    out = tmp_path / "plan.json"
    res = runner.invoke(_app(), ["vram", "Llama-3.1-8B", "--gpu", "H200", "--tp", "2", "--max-model-len", "32768",
                                 "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for key in ("parameters", "weight_bytes", "kv_bytes_per_token", "kv_pool_bytes", "kv_tokens", "max_concurrency"):
        assert {"per_rank", "total"} <= set(d[key]), key
    assert d["kv_bytes_per_token"] == {"per_rank": 65_536, "total": 131_072, "model": 131_072}
    assert d["terms"]["activation_peak"]["estimate"] is True and d["terms"]["weights"]["estimate"] is False
    assert d["inputs"]["tp"] == 2 and d["fits"] is True
    assert json.loads(out.read_text()) == d


def test_cli_does_not_fit_exit_code_and_json():
    res = runner.invoke(_app(), ["vram", "Llama-3.1-8B", "--gpu", "RTX4090", "--json"])
    assert res.exit_code == 1
    d = json.loads(res.stdout)
    assert d["error"]["type"] == "DoesNotFit" and d["error"]["largest_max_model_len"] > 0
    assert d["fits"] is False


def test_cli_bad_config_exit_code():
    res = runner.invoke(_app(), ["vram", "no-such-model", "--gpu", "H100"])
    assert res.exit_code == 2
    assert "shipped" in res.output


@pytest.mark.skipif(cuda_available(), reason="this machine has CUDA")
def test_cli_measure_without_cuda_fails_clearly():
    res = runner.invoke(_app(), ["vram", "Llama-3.1-8B", "--gpu", "H200", "--measure", "--json"])
    assert res.exit_code == 3
    assert "CUDA" in res.output


# --------------------------------------------------------------------------------------------
# estimates vs published engine figures (vLLM 0.19.0 on H100 80GB HBM3, --gpu-memory-utilization 0.95,
# max_num_batched_tokens 8192, max_num_seqs 1024: llm-d-incubation/llm-d-planner accuracy/results/v0.19.0)
# --------------------------------------------------------------------------------------------

VLLM_019 = dict(gpu="H100", gpu_memory_utilization=0.95, max_num_batched_tokens=8192, max_num_seqs=1024)


def within(value: float, published: float, tol: float = 0.02) -> bool:
    return abs(value - published) <= tol * abs(published)


def test_llama_31_8b_against_vllm_log():
    # "Model loading took 14.99 GiB", "torch peak memory increase: 1.89GiB; non-torch forward increase memory:
    # 0.25GiB", "Available KV cache memory: 58.11 GiB", "GPU KV cache size: 476,016 tokens",
    # "Maximum concurrency for 16,384 tokens per request: 29.05x"
    p = plan("Llama-3.1-8B", max_model_len=16384, **VLLM_019)
    assert within(gib(p.weights_loaded_bytes), 14.99, 0.005)
    assert within(gib(p.term("activation_peak").bytes), 1.89)
    assert within(gib(p.kv_pool_bytes), 58.11)
    assert within(p.kv_tokens, 476_016)
    assert within(p.max_concurrency, 29.05)


def test_llama_31_8b_fp8_variants_against_vllm_logs():
    kv8 = plan("Llama-3.1-8B", max_model_len=16384, kv_dtype="fp8", **VLLM_019)
    assert within(kv8.kv_tokens, 952_032)  # --kv-cache-dtype fp8
    w8 = plan("Llama-3.1-8B", max_model_len=8192, dtype="fp8", **VLLM_019)
    assert within(gib(w8.weights_loaded_bytes), 8.49)  # --quantization fp8: "8.49 GiB"
    assert within(gib(w8.kv_pool_bytes), 64.61)


def test_llama_31_8b_tp2_against_vllm_log():
    p = plan("Llama-3.1-8B", tp=2, max_model_len=8192, **VLLM_019)
    assert within(gib(p.weights_loaded_bytes), 7.51)
    assert within(gib(p.term("non_torch").bytes), 2.07)


def test_qwen25_7b_instruct_against_vllm_log():
    cfg, _, _ = load_config("Qwen2.5-7B")
    cfg["max_position_embeddings"] = 32768  # the -Instruct config differs only here
    p = plan(cfg, max_model_len=8192, **VLLM_019)
    assert within(gib(p.weights_loaded_bytes), 14.25)
    assert within(gib(p.term("activation_peak").bytes), 2.21)
    assert within(gib(p.kv_pool_bytes), 58.53)
    assert within(p.kv_tokens, 1_096_000)
    assert within(plan(cfg, max_model_len=8192, kv_dtype="fp8", **VLLM_019).kv_tokens, 2_192_000)


def test_gemma3_27b_it_against_vllm_log():
    # "Add 8 padding layers", "Available KV cache memory: 19.53 GiB", "GPU KV cache size: 36,560 tokens",
    # "Maximum concurrency for 8,192 tokens per request: 4.46x"
    p = plan("gemma-3-27b-it", max_model_len=8192, **VLLM_019)
    assert p.layout.padding_layers == 8
    assert within(gib(p.weights_loaded_bytes), 51.45)
    assert within(gib(p.kv_pool_bytes), 19.53)
    assert within(p.kv_tokens, 36_560)
    assert within(p.max_concurrency, 4.46)


# --------------------------------------------------------------------------------------------
# --measure, exercised on a fake CUDA runtime (the real run happens on the GPU host)
# --------------------------------------------------------------------------------------------


class _FakeCuda:
    """Just enough of torch.cuda for measure(): a device whose free memory follows live allocations."""

    class OutOfMemoryError(RuntimeError):
        pass

    def __init__(self, total: int, context: int):
        self.total, self.context, self.live = total, context, 0

    def is_available(self) -> bool:
        return True

    def set_device(self, dev) -> None:
        pass

    def synchronize(self, dev=None) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_properties(self, dev):
        return type("Props", (), {"name": "Fake H200", "total_memory": self.total})()

    def mem_get_info(self, dev=None):
        return self.total - self.context - self.live, self.total

    def memory_allocated(self, dev=None) -> int:
        return self.live

    memory_reserved = memory_allocated


class _FakeTensor:
    def __init__(self, cuda: _FakeCuda, nbytes: int):
        self.cuda, self.nbytes = cuda, nbytes
        cuda.live += nbytes

    def __del__(self):
        self.cuda.live -= self.nbytes


def _fake_torch(cuda: _FakeCuda):
    def empty(shape, dtype=None, device=None):
        n = shape if isinstance(shape, int) else shape[0] * shape[1]
        n = -(-n // (2 * MiB)) * 2 * MiB  # the caching allocator rounds large blocks to 2 MiB
        if n > cuda.mem_get_info()[0]:
            raise cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate ...")
        return _FakeTensor(cuda, n)

    return type("FakeTorch", (), {
        "cuda": cuda, "empty": staticmethod(empty), "uint8": "uint8", "__version__": "fake",
        "device": staticmethod(lambda *a: a), "version": type("V", (), {"cuda": "12.8"}),
    })


def test_measure_record_on_a_fake_gpu(monkeypatch, tmp_path):
    import sys

    from ridgeline.vram import measure as measure_mod

    h200 = lookup_gpu("H200").total_bytes
    cuda = _FakeCuda(total=h200, context=int(0.5 * GiB))
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(cuda))
    monkeypatch.setattr(measure_mod, "cuda_available", lambda: True)
    p = plan("Llama-3.1-8B", gpu="H200")
    rec = measure_mod.measure(p)
    assert "error" not in rec
    assert [s["name"].split(" ")[0] for s in rec["stages"]] == ["weights", "KV", "activation"]
    for stage in rec["stages"]:
        assert 0 <= stage["observed"] - stage["planned"] < 2 * MiB * p.layout.group_size
    assert rec["plan_gpu_total_minus_device_bytes"] == 0
    assert rec["kv_pool_with_device_total_bytes"] == p.kv_pool_bytes
    assert rec["free_after_release_bytes"] == h200 - int(0.5 * GiB) and cuda.live == 0

    out = tmp_path / "measure.json"
    res = runner.invoke(_app(), ["vram", "Llama-3.1-8B", "--gpu", "H200", "--measure", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["measure"]["device"]["name"] == "Fake H200" and d["kv_tokens"]["per_rank"] == p.kv_tokens
    assert json.loads(out.read_text()) == d


def test_measure_reports_oom_instead_of_crashing(monkeypatch):
    import sys

    from ridgeline.vram import measure as measure_mod

    cuda = _FakeCuda(total=lookup_gpu("H200").total_bytes, context=40 * GiB)  # another process holds 40 GiB
    monkeypatch.setitem(sys.modules, "torch", _fake_torch(cuda))
    monkeypatch.setattr(measure_mod, "cuda_available", lambda: True)
    rec = measure_mod.measure(plan("Llama-3.1-8B", gpu="H200"))
    assert rec["error"].startswith("CUDA out of memory after 1 stage")
    assert cuda.live == 0
    res = runner.invoke(_app(), ["vram", "Llama-3.1-8B", "--gpu", "H200", "--measure", "--json"])
    assert res.exit_code == 3 and json.loads(res.stdout)["measure"]["error"]
