"""The optional peer adapters (liger, vllm, flashinfer, quack) on a CPU-only machine.

Without their library each resolves to unavailable with a reason naming the pip package; with a plain-torch
stand-in of the library (tests/stand_ins) each is called with the op's public convention and matches the
spec's reference; a stand-in with the wrong API, or an install that fails to import, is reported, not raised.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from ridgeline.core import registry
from ridgeline.core.spec import Case
from stand_ins import flashinfer as fake_flashinfer
from stand_ins import install
from stand_ins import liger as fake_liger
from stand_ins import quack as fake_quack
from stand_ins import vllm as fake_vllm

OPS = ("rmsnorm", "fused_add_rmsnorm")


@dataclass(frozen=True)
class Peer:
    name: str  # registered implementation name
    pip: str  # what `pip install` takes
    top: str  # top-level import name
    adapter: str  # our adapter module
    fake: Callable[..., dict[str, types.ModuleType]]
    fused_in_place: bool  # the vLLM convention: x <- out, residual <- residual_out

    def __str__(self) -> str:
        return self.name


PEERS = [
    Peer("liger", "liger-kernel", "liger_kernel", "ridgeline.ops.rmsnorm.peers.liger", fake_liger.build, False),
    Peer("vllm", "vllm", "vllm", "ridgeline.ops.rmsnorm.peers.vllm", fake_vllm.build, True),
    Peer("flashinfer", "flashinfer-python", "flashinfer", "ridgeline.ops.rmsnorm.peers.flashinfer",
         fake_flashinfer.build, True),
    Peer("quack", "quack-kernels", "quack", "ridgeline.ops.rmsnorm.peers.quack", fake_quack.build, False),
]
BY_NAME = {p.name: p for p in PEERS}

CASES = [
    Case((7, 769), torch.float32),
    Case((7, 769), torch.bfloat16),
    Case((2, 5, 769), torch.float16),
    Case((7, 769), torch.bfloat16, "strided"),
]


@pytest.fixture(autouse=True)
def fresh_resolutions(monkeypatch: pytest.MonkeyPatch) -> None:
    registry.get_spec("rmsnorm")  # import every adapter first, so each test only resets the cache
    monkeypatch.setattr(registry, "_RESOLVED", {})


def _block(monkeypatch: pytest.MonkeyPatch, top: str) -> None:
    """Make `import top` fail as if it were not installed, even where it is."""
    for name in list(sys.modules):
        if name.partition(".")[0] == top:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)


def _install_fake(monkeypatch: pytest.MonkeyPatch, peer: Peer, **variant: Any) -> None:
    install(monkeypatch, peer.fake(**variant))
    if peer.name == "vllm":
        # The stand-in is pure Python: there is no compiled torch.ops._C for the adapter to find.
        monkeypatch.setattr(importlib.import_module(peer.adapter), "_missing_compiled_ops", lambda names: [])


def _impl(op: str, name: str) -> registry.Impl:
    found = [i for i in registry.implementations(op) if i.name == name]
    assert len(found) == 1, f"{name} registered {len(found)} times for {op}"
    return found[0]


@pytest.mark.parametrize("peer", PEERS, ids=str)
def test_importing_adapter_does_not_import_library(peer: Peer, monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, peer.top)
    importlib.reload(importlib.import_module(peer.adapter))  # would raise if it imported the library
    assert sys.modules[peer.top] is None


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("peer", PEERS, ids=str)
def test_unavailable_without_library(peer: Peer, op: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _block(monkeypatch, peer.top)
    impl = _impl(op, peer.name)
    assert not impl.available
    assert impl.fn is None
    assert impl.reason == f"{peer.pip} not installed"
    assert impl.source == "peer"


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("peer", PEERS, ids=str)
def test_this_machine_resolves_without_raising(peer: Peer, op: str) -> None:
    impl = _impl(op, peer.name)
    if importlib.util.find_spec(peer.top) is None:
        assert impl.reason == f"{peer.pip} not installed"
    else:  # installed: usable, or a reason that names the package
        assert impl.available or peer.pip in impl.reason


@pytest.mark.parametrize("case", CASES, ids=Case.label)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("peer", PEERS, ids=str)
def test_stand_in_matches_reference(peer: Peer, op: str, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake(monkeypatch, peer)
    spec = registry.get_spec(op)
    impl = registry.resolve(op, peer.name)
    assert impl.available, impl.reason

    inputs = spec.make_inputs(case, "cpu", seed=3)
    before = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    refs = spec.reference(before)
    outs = spec.call(impl.fn, inputs)

    assert len(outs) == len(spec.outputs)
    for name, out, ref in zip(spec.outputs, outs, refs):
        assert out.shape == ref.shape, name
        assert out.dtype == case.dtype, name
        tol = spec.tolerance(case.dtype, name)
        err = (out.double() - ref).abs()
        assert (err <= tol.atol + tol.rtol * ref.abs()).all(), f"{name}: max abs err {float(err.max())}"

    in_place = op == "fused_add_rmsnorm" and peer.fused_in_place
    assert impl.mutates == (("x", "residual") if in_place else ())
    if in_place:
        # The outputs are the caller's x and residual, overwritten.
        assert outs[0] is inputs["x"] and outs[1] is inputs["residual"]
        assert not torch.equal(inputs["x"], before["x"])
        assert not torch.equal(inputs["residual"], before["residual"])
    else:
        for k, v in before.items():
            if isinstance(v, torch.Tensor):
                assert torch.equal(inputs[k], v), f"{peer.name} wrote into {k} without declaring it"


def test_liger_called_with_llama_casting_and_zero_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    _install_fake(monkeypatch, BY_NAME["liger"])
    monkeypatch.setattr(fake_liger, "CALLS", [])
    for op in OPS:
        spec = registry.get_spec(op)
        spec.call(registry.resolve(op, "liger").fn, spec.make_inputs(Case((3, 64), torch.float32), "cpu", 0))
    assert fake_liger.CALLS == [("rms_norm", 0.0, "llama"), ("fused_add_rms_norm", 0.0, "llama")]


WRONG_API = [
    # (peer, stand-in variant, broken op, words in the reason, the other op still available)
    ("liger", {"fused": False}, "fused_add_rmsnorm", "has no module liger_kernel.ops.fused_add_rms_norm", True),
    ("liger", {"old_rms_signature": True}, "rmsnorm", "takes fewer than 5 arguments", True),
    ("vllm", {"fused": False}, "fused_add_rmsnorm", "vllm._custom_ops has no fused_add_rms_norm", True),
    ("vllm", {"old_rms_signature": True}, "rmsnorm", "does not take 4 positional arguments", True),
    ("flashinfer", {"fused": False}, "fused_add_rmsnorm", "flashinfer.norm has no fused_add_rmsnorm", True),
    ("flashinfer", {"rmsnorm_without_eps": True}, "rmsnorm", "does not take 2 positional arguments, eps=", True),
    ("quack", {"residual": False}, "fused_add_rmsnorm", "residual=, eps=, prenorm=", True),
]


@pytest.mark.parametrize(("name", "variant", "op", "words", "other_ok"), WRONG_API,
                         ids=[f"{w[0]}-{w[2]}-{next(iter(w[1]))}" for w in WRONG_API])
def test_wrong_api_is_unavailable_with_reason(
    name: str, variant: dict[str, bool], op: str, words: str, other_ok: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    peer = BY_NAME[name]
    _install_fake(monkeypatch, peer, **variant)
    impl = registry.resolve(op, name)
    assert not impl.available
    assert impl.reason.startswith(peer.pip), impl.reason
    assert words in impl.reason, impl.reason
    other = registry.resolve(next(o for o in OPS if o != op), name)
    assert other.available == other_ok, other.reason


@pytest.mark.skipif(hasattr(torch.ops._C, "rms_norm"), reason="a real vLLM extension is loaded")
def test_vllm_without_compiled_ops_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, fake_vllm.build())  # the Python wrappers, but nothing registered in torch.ops._C
    impl = registry.resolve("rmsnorm", "vllm")
    assert not impl.available
    assert "compiled ops are not loaded (torch.ops._C.rms_norm missing)" in impl.reason


@pytest.mark.parametrize("peer", PEERS, ids=str)
def test_install_that_fails_to_import_is_unavailable(
    peer: Peer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a CUDA-only build does on a machine without the driver.
    (tmp_path / peer.top).mkdir()
    (tmp_path / peer.top / "__init__.py").write_text(
        'raise OSError("libcuda.so.1: cannot open shared object file")\n'
    )
    for name in list(sys.modules):
        if name.partition(".")[0] == peer.top:
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    for op in OPS:
        impl = registry.resolve(op, peer.name)
        assert not impl.available
        assert impl.reason.startswith(f"{peer.pip} is installed but `import {peer.top}` failed: OSError: "
                                      "libcuda.so.1"), impl.reason
