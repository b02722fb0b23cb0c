"""ridgeline.patch(model) on small Hugging Face models built from configs (random weights, no download): the same
loss and gradients as the unpatched model, every swap counted, and undo restoring the original exactly."""

import copy

import pytest
import torch

from conftest import DEVICE

transformers = pytest.importorskip("transformers")

import ridgeline  # noqa: E402
from ridgeline.nn.patch import SUPPORTED  # noqa: E402

LAYERS = 2


def _config(model_type: str, hidden_act: str = "silu"):
    common = dict(vocab_size=160, hidden_size=64, intermediate_size=96, num_hidden_layers=LAYERS,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  hidden_act=hidden_act, attn_implementation="eager", tie_word_embeddings=False)
    if model_type == "qwen3":
        common["head_dim"] = 16
    cls = transformers.AutoConfig.for_model(model_type, **common)
    return cls


def _model(model_type: str, hidden_act: str = "silu", dtype=torch.float32):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(_config(model_type, hidden_act))
    with torch.no_grad():  # norm weights start at ones: spread them so a skipped multiply shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(0.3 * torch.randn_like(p))
    return model.to(device=DEVICE, dtype=dtype)


def _batch(vocab: int = 160, b: int = 2, s: int = 11):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (b, s), generator=g)
    labels = ids.clone()
    labels[0, :3] = -100  # ignored positions
    return ids.to(DEVICE), labels.to(DEVICE)


def _step(model, ids, labels):
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    return out.loss.detach(), out.logits.detach(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("model_type", SUPPORTED)
def test_patched_model_matches_unpatched(model_type):
    base = _model(model_type)
    ids, labels = _batch()
    loss0, logits0, grads0 = _step(base, ids, labels)
    model = copy.deepcopy(base)
    handle = ridgeline.patch(model)
    assert handle.swapped == {"rms_norm": 2 * LAYERS + 1 + (2 * LAYERS if model_type == "qwen3" else 0),
                              "mlp": LAYERS, "rotary": 1, "loss": 1}, handle
    assert handle.skipped == []
    loss1, logits1, grads1 = _step(model, ids, labels)
    torch.testing.assert_close(loss1, loss0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits1, logits0, atol=1e-4, rtol=1e-4)
    for name, g in grads0.items():
        torch.testing.assert_close(grads1[name], g, atol=1e-4, rtol=1e-3, msg=lambda m, n=name: f"{n}: {m}")
    handle.undo()
    loss2, logits2, _ = _step(model, ids, labels)
    assert torch.equal(logits2, logits0) and torch.equal(loss2, loss0)


def test_patch_calls_our_kernels(monkeypatch):
    """The swapped paths really run ridgeline's functions (not the originals that happen to agree)."""
    model = _model("llama")
    calls: dict[str, int] = {}
    for name in ("rms_norm", "silu_mul", "apply_rotary", "cross_entropy"):
        real = getattr(ridgeline, name)

        def counting(*a, _real=real, _name=name, **k):
            calls[_name] = calls.get(_name, 0) + 1
            return _real(*a, **k)

        monkeypatch.setattr(ridgeline, name, counting, raising=False)
    ids, labels = _batch()
    with ridgeline.patch(model):
        model(input_ids=ids, labels=labels)
    assert calls == {"rms_norm": 2 * LAYERS + 1, "silu_mul": LAYERS, "apply_rotary": LAYERS, "cross_entropy": 1}


def test_gelu_mlp_and_partial_patch():
    model = _model("llama", hidden_act="gelu_pytorch_tanh")
    ids, labels = _batch()
    loss0, _, _ = _step(copy.deepcopy(model), ids, labels)
    with ridgeline.patch(model, rotary=False, loss=False) as handle:
        assert handle.swapped == {"rms_norm": 2 * LAYERS + 1, "mlp": LAYERS}
        loss1, _, _ = _step(model, ids, labels)
    torch.testing.assert_close(loss1, loss0, atol=1e-5, rtol=1e-5)


def test_unknown_activation_is_skipped_and_named():
    model = _model("llama", hidden_act="relu")
    with ridgeline.patch(model) as handle:
        assert "mlp" not in handle.swapped
        assert handle.skipped == ["mlp: activation 'relu' has no ridgeline kernel"]


def test_rotary_stays_until_the_last_model_is_undone():
    from transformers.models.llama import modeling_llama

    original = modeling_llama.apply_rotary_pos_emb
    a, b = ridgeline.patch(_model("llama")), ridgeline.patch(_model("llama"))
    assert modeling_llama.apply_rotary_pos_emb is not original
    a.undo()
    assert modeling_llama.apply_rotary_pos_emb is not original
    b.undo()
    assert modeling_llama.apply_rotary_pos_emb is original


def test_unsupported_model_is_one_line():
    with pytest.raises(ValueError, match=r"^model: ridgeline.patch supports .*got 'Linear'$"):
        ridgeline.patch(torch.nn.Linear(2, 2))


def test_undo_puts_back_a_forward_set_on_the_instance():
    """accelerate's device hooks (and other wrappers) set `forward` on the module instance: undo restores it."""
    import types

    model = _model("llama")
    norm, plain = model.model.norm, model.model.layers[0].input_layernorm
    hooked = types.MethodType(type(norm).forward, norm)
    norm.forward = hooked
    with ridgeline.patch(model, mlp=False, rotary=False, loss=False):
        assert norm.forward is not hooked and "forward" in plain.__dict__
    assert norm.__dict__["forward"] is hooked
    assert "forward" not in plain.__dict__


def test_patched_rmsnorm_keeps_hugging_faces_output_dtype():
    """An fp32 norm weight on bf16 activations (mixed-precision training) gives fp32 out in HF: so does ours."""
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from ridgeline.nn.patch import _rms_forward

    norm = LlamaRMSNorm(64, eps=1e-5).to(DEVICE)
    with torch.no_grad():
        norm.weight.add_(0.3 * torch.randn(64))
    x = torch.randn(3, 64, device=DEVICE).to(torch.bfloat16)
    want, got = norm(x), _rms_forward(norm, x)
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got, want, atol=2e-2, rtol=1e-2)
