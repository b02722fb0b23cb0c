"""ridgeline.nn layers: forward and backward against the torch modules they replace."""

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE
from ridgeline import nn as rnn


def _x(*shape):
    return torch.randn(*shape, device=DEVICE, dtype=torch.float32, requires_grad=True)


def _grads(fn, *tensors):
    out = fn()
    dy = torch.randn_like(out)
    return out, torch.autograd.grad(out, tensors, dy)


def test_rmsnorm_layer():
    layer = rnn.RMSNorm(48, eps=1e-5).to(DEVICE)
    with torch.no_grad():
        layer.weight.add_(0.3 * torch.randn_like(layer.weight))
    x = _x(5, 48)
    torch.manual_seed(2)
    out, (dx, dw) = _grads(lambda: layer(x), x, layer.weight)
    torch.manual_seed(2)
    ref, (rdx, rdw) = _grads(lambda: F.rms_norm(x, (48,), layer.weight, 1e-5), x, layer.weight)
    for a, b in ((out, ref), (dx, rdx), (dw, rdw)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("bias", [True, False])
def test_layernorm_layer(bias):
    layer, ref_layer = rnn.LayerNorm(40, bias=bias).to(DEVICE), torch.nn.LayerNorm(40, bias=bias).to(DEVICE)
    with torch.no_grad():
        ref_layer.weight.copy_(1 + 0.3 * torch.randn(40))
        layer.weight.copy_(ref_layer.weight)
        if bias:
            ref_layer.bias.copy_(torch.randn(40))
            layer.bias.copy_(ref_layer.bias)
    x = _x(6, 40)
    torch.testing.assert_close(layer(x), ref_layer(x), atol=1e-5, rtol=1e-4)


def test_activation_and_softmax_layers():
    x = _x(3, 2 * 24)
    gate, up = x[..., :24], x[..., 24:]
    torch.testing.assert_close(rnn.SiluAndMul()(x), F.silu(gate) * up, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(rnn.GeluAndMul("tanh")(x), F.gelu(gate, approximate="tanh") * up, atol=1e-5,
                               rtol=1e-4)
    torch.testing.assert_close(rnn.GeluAndMul()(x), F.gelu(gate) * up, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(rnn.Softmax(-1)(x), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)


def test_cross_entropy_layer_trains():
    logits = _x(7, 50)
    target = torch.randint(0, 50, (7,), device=DEVICE)
    target[2] = -100
    loss = rnn.CrossEntropyLoss()(logits, target)
    (g,) = torch.autograd.grad(loss, logits)
    ref = F.cross_entropy(logits, target)
    (rg,) = torch.autograd.grad(ref, logits)
    torch.testing.assert_close(loss, ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(g, rg, atol=1e-6, rtol=1e-4)
