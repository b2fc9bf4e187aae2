"""The eager ops' hot path (issue 21): checks once per call signature, full checks on anything new; CUDA graph capture
and torch.compile(fullgraph=True) keep working.

CPU: an op defined here counts its ``prepare`` calls; the library ops raise their usual errors after a cached call.
GPU (marker gpu): each op captured in a CUDA graph and replayed on new data, and run under
torch.compile(fullgraph=True).
"""
from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import torchtrt_ext
from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError
from torchtrt_ext.ops import Attr, Decomposer, OpSpec, deform_conv2d, define_op, l2norm
from tests.helpers import rel_err

PREPARED: list[tuple] = []


def _prepare(shapes: list, dtypes: list, scale: float, axes: tuple) -> dict[str, Any]:
    PREPARED.append((tuple(shapes), scale, axes))
    return {"scale": scale, "axes": axes}


def _decompose(d: Decomposer, inputs: list[str], outputs: list[str], scale: float, axes: tuple) -> None:
    d.op("Mul", inputs[0], d.op("CastLike", d.const(scale), inputs[0]), out=outputs[0])


COUNTED = define_op(OpSpec(
    name="TestCountedScale", inputs=("x",), outputs=("y",),
    attrs=(Attr("scale", "float", default=1.0, check=lambda v: v != 0, allowed="a non-zero float"),
           Attr("axes", "ints", default=(0,))),
    eager=lambda x, scale, axes: x * scale, shape_rule=lambda shapes, dtypes, **_: [(shapes[0], dtypes[0])],
    decompose=_decompose, prepare=_prepare, doc="x * scale"))


def test_prepare_runs_once_per_signature() -> None:
    PREPARED.clear()
    x = torch.randn(2, 3)
    for _ in range(3):
        assert torch.equal(COUNTED(x, scale=2.0, axes=(1,)), x * 2)
    assert len(PREPARED) == 1
    COUNTED(torch.randn(2, 3), scale=2.0, axes=(1,))  # other data, same signature
    assert len(PREPARED) == 1
    COUNTED(torch.randn(4, 3), scale=2.0, axes=(1,))  # new shape
    COUNTED(x.half(), scale=2.0, axes=(1,))  # new dtype
    COUNTED(x, scale=3.0, axes=(1,))  # new value
    COUNTED(x, scale=2, axes=(1,))  # same value, another type: checked (and coerced) again
    assert len(PREPARED) == 5
    COUNTED(x, scale=2.0, axes=[1])  # a list is not hashable: checked on every call
    COUNTED(x, scale=2.0, axes=[1])
    assert len(PREPARED) == 7


def test_parameters_are_checked_once_too() -> None:
    """Module weights are Parameters: their calls take the same once-per-signature path as plain tensors."""
    PREPARED.clear()
    weight = torch.nn.Parameter(torch.randn(5, 2))
    with torch.no_grad():
        COUNTED(weight, scale=2.0, axes=(1,))
        COUNTED(weight, scale=2.0, axes=(1,))
    assert len(PREPARED) == 1


def test_new_attribute_types_are_checked_after_a_cached_call() -> None:
    x = torch.randn(2, 3)
    COUNTED(x, scale=2.0, axes=(1,))
    with pytest.raises(InvalidAttributeError, match=r"argument axes must be a list of int, got \(True,\)"):
        COUNTED(x, scale=2.0, axes=(True,))
    with pytest.raises(InvalidAttributeError, match=r"argument scale=0.0 is not allowed"):
        COUNTED(x, scale=0.0, axes=(1,))


def test_l2norm_errors_unchanged_after_a_cached_call() -> None:
    x = torch.randn(2, 5, 3)
    l2norm(x, dim=1)
    l2norm(x, dim=1)
    with pytest.raises(InvalidAttributeError, match=r"argument dim \(ONNX attribute 'axis'\) must be of type int"):
        l2norm(x, dim=True)  # type: ignore[arg-type]
    with pytest.raises(InvalidAttributeError, match=r"dim=3 is out of range for a rank-3 input"):
        l2norm(x, dim=3)
    with pytest.raises(InvalidInputError, match=r"input 'x' has dtype torch.int64; allowed"):
        l2norm(torch.ones(2, 5, 3, dtype=torch.int64), dim=1)


def test_deform_conv2d_errors_unchanged_after_a_cached_call() -> None:
    x, off, w = torch.randn(1, 4, 6, 6), torch.randn(1, 18, 6, 6), torch.randn(4, 4, 3, 3)
    deform_conv2d(x, off, w, padding=1)
    deform_conv2d(x, off, w, padding=1)
    with pytest.raises(InvalidAttributeError, match=r"argument stride must be a list of int, got \(True, 1\)"):
        deform_conv2d(x, off, w, padding=1, stride=(True, 1))
    with pytest.raises(InvalidInputError, match=r"'offset' has spatial size 6x6; expected the output size 4x4"):
        deform_conv2d(x, off, w)
    with pytest.raises(InvalidInputError, match=r"'offset' has dtype torch.float16; expected the dtype of 'input'"):
        deform_conv2d(x, off.half(), w, padding=1)


# ------------------------------------------------------------------------------------------------------- GPU
def _dcn_inputs(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(1, 64, 20, 20, device="cuda", generator=gen).to(dtype)
    off = (torch.randn(1, 18, 20, 20, device="cuda", generator=gen) * 2).to(dtype)
    mask = torch.rand(1, 9, 20, 20, device="cuda", generator=gen).to(dtype)
    w = (torch.randn(32, 64, 3, 3, device="cuda", generator=gen) * 0.05).to(dtype)
    b = torch.randn(32, device="cuda", generator=gen).to(dtype)
    return x, off, mask, w, b


def _capture_and_replay(fn: Any, static: list[torch.Tensor], fresh: list[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """Capture ``fn(*static)`` in a CUDA graph, copy ``fresh`` into ``static``, replay: (replayed out, eager out)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture: first-call checks, caches, allocator
        for _ in range(2):
            fn(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*static)
    for s, f in zip(static, fresh):
        s.copy_(f)
    graph.replay()
    torch.cuda.synchronize()
    return out.clone(), fn(*fresh)


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["op", "module"])
def test_l2norm_replays_in_a_cuda_graph_on_new_data(how: str) -> None:
    fn = (lambda t: l2norm(t, dim=1)) if how == "op" else torchtrt_ext.nn.L2Norm(dim=1)
    static, fresh = torch.randn(2, 64, 9, 7, device="cuda"), torch.randn(2, 64, 9, 7, device="cuda") * 3
    replayed, eager = _capture_and_replay(fn, [static], [fresh])
    assert torch.equal(replayed, eager)
    assert rel_err(replayed.cpu(), F.normalize(fresh.cpu().double(), dim=1, eps=1e-6)) < 1e-6


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["op", "module"])
def test_deform_conv2d_replays_in_a_cuda_graph_on_new_data(how: str) -> None:
    from torchvision.ops import deform_conv2d as tv_deform_conv2d

    x, off, mask, w, b = _dcn_inputs()
    if how == "op":
        def fn(x: torch.Tensor, off: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return deform_conv2d(x, off, w, b, mask=mask, padding=1)
    else:
        module = torchtrt_ext.nn.DeformConv2d(64, 32, 3, padding=1).cuda()
        with torch.no_grad():
            module.weight.copy_(w)
            module.bias.copy_(b)  # type: ignore[union-attr]

        def fn(x: torch.Tensor, off: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                out: torch.Tensor = module(x, off, mask)
            return out
    fresh = [x * 2 - 1, off.flip(-1), 1 - mask]
    replayed, eager = _capture_and_replay(fn, [x.clone(), off.clone(), mask.clone()], fresh)
    assert torch.equal(replayed, eager)
    ref = tv_deform_conv2d(*(t.double() for t in fresh[:2]), w.double(), b.double(), padding=1,
                           mask=fresh[2].double())
    assert rel_err(replayed.cpu(), ref.cpu()) < 1e-5


@pytest.mark.gpu
def test_both_ops_run_under_torch_compile_fullgraph() -> None:
    x, off, mask, w, b = _dcn_inputs()
    module = torchtrt_ext.nn.L2Norm(dim=1)

    def model(x: torch.Tensor, off: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return module(deform_conv2d(x, off, w, b, mask=mask, padding=1) * 2) + l2norm(x[:, :32], dim=1)

    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    with torch.no_grad():
        expected = model(x, off, mask)
        got = compiled(x, off, mask)
        got_again = compiled(x + 1, off, mask)  # a second call reuses the graph
    assert rel_err(got.cpu(), expected.cpu()) < 1e-5
    assert rel_err(got_again.cpu(), model(x + 1, off, mask).cpu()) < 1e-5
