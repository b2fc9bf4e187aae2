"""The eager ops' hot path (issue 21): checks once per call signature, full checks on anything new; CUDA graph capture
and torch.compile(fullgraph=True) keep working; whatever must see the op (a dispatch mode such as make_fx's, a functorch
transform) gets it through the dispatcher.

CPU: an op defined here counts its ``prepare`` calls; the library ops raise their usual errors after a cached call;
every op compiles with fullgraph=True on a signature never called before (dynamo traces the checks themselves); the
float32 attribute check agrees with numpy's rounding; a missing kernels library falls back to the math.
GPU (marker gpu): each op captured in a CUDA graph and replayed on new data, and run under
torch.compile(fullgraph=True); the CPU tests that take a device run on CUDA too, where the kernel is called directly.
"""
from __future__ import annotations

import itertools
import linecache
import warnings
from typing import Any

import numpy as np
import pytest
import torch
import torch._dynamo.testing
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

import torchtrt_ext
from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError, LibraryNotFoundError
from torchtrt_ext.ops import Attr, Decomposer, OpSpec, deform_conv2d, define_op, efficient_nms, l2norm
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
    with pytest.raises(InvalidAttributeError, match=r"dim=3 is out of range for a rank-3 input") as raised:
        l2norm(x, dim=3)
    assert raised.value.__context__ is None  # raised by the checks, not while handling the cache miss
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


def _missing_library(x: torch.Tensor, scale: float) -> torch.Tensor:
    """A named stand-in for a ``cuda=`` whose kernels library is not built."""
    raise LibraryNotFoundError("libtorchtrt_ext_kernels.so not found. Remedy: build it")


_FALLBACKS = itertools.count()


def _fallback_op() -> torchtrt_ext.ops.CustomOp:
    """x * scale whose kernels library is missing, defined under a fresh name: its one warning is not spent by an
    earlier run in this process."""
    return define_op(OpSpec(
        name=f"TestFallbackScale{next(_FALLBACKS)}", inputs=("x",), outputs=("y",),
        attrs=(Attr("scale", "float", default=1.0),),
        eager=lambda x, scale: x * scale, shape_rule=lambda shapes, dtypes, **_: [(shapes[0], dtypes[0])],
        decompose=lambda d, inputs, outputs, scale: d.op("Identity", inputs[0], out=outputs[0]),
        cuda=_missing_library))


def test_a_missing_kernel_library_falls_back_to_the_math_with_one_warning() -> None:
    fallback = _fallback_op()
    name = fallback.spec.name
    x = torch.randn(3, 2)
    with pytest.warns(UserWarning, match=rf"{name}: CUDA kernel unavailable, using PyTorch math\. .*found"):
        assert torch.equal(fallback._run_cuda((x,), {"scale": 2.0}), x * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second fallback stays silent
        assert torch.equal(fallback._run_cuda((x,), {"scale": 3.0}), x * 3)


@pytest.mark.gpu
def test_the_fallback_warning_points_at_the_callers_line() -> None:
    """On plain CUDA tensors the op calls its kernel directly; a missing library's warning names the user's call."""
    fallback = _fallback_op()
    x = torch.randn(3, 2, device="cuda")
    with pytest.warns(UserWarning, match="CUDA kernel unavailable, using PyTorch math") as record:
        y = fallback(x, scale=2.0)
    assert torch.equal(y, x * 2)
    (warning,) = [w for w in record if "CUDA kernel unavailable" in str(w.message)]
    assert warning.filename == __file__ and "fallback(x, scale=2.0)" in linecache.getline(__file__, warning.lineno)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
def test_every_op_compiles_fullgraph_on_a_new_signature(device: str) -> None:
    """No eager call comes first: dynamo traces the full checks (no numpy in them) and emits each op in one graph."""
    gen = torch.Generator().manual_seed(0)
    x, off, w = torch.randn(1, 6, 7, 5, generator=gen), torch.randn(1, 18, 7, 5, generator=gen), torch.randn(6, 6, 3, 3)
    boxes = torch.rand(1, 40, 4, generator=gen)
    boxes[..., 2:] += boxes[..., :2]
    scores = torch.rand(1, 40, 3, generator=gen)
    x, off, w, boxes, scores = (t.to(device) for t in (x, off, w, boxes, scores))
    module = torchtrt_ext.nn.L2Norm(dim=-1).to(device)

    def model(x: torch.Tensor, off: torch.Tensor, boxes: torch.Tensor, scores: torch.Tensor) -> tuple:
        y = deform_conv2d(l2norm(x, dim=1, eps=1e-5), off, w, padding=1)
        return (module(y),) + efficient_nms(boxes, scores, score_threshold=0.3, max_output_boxes=9)

    torch._dynamo.reset()
    recorder = torch._dynamo.testing.EagerAndRecordGraphs()
    with torch.no_grad():
        got = torch.compile(model, backend=recorder, fullgraph=True)(x, off, boxes, scores)
        expected = model(x, off, boxes, scores)
    assert len(recorder.graphs) == 1
    called = {getattr(n.target, "overloadpacket", n.target) for n in recorder.graphs[0].graph.nodes}
    assert {torch.ops.torchtrt_ext.l2norm, torch.ops.torchtrt_ext.deformconv2d,
            torch.ops.torchtrt_ext.efficient_nms} <= called
    assert rel_err(got[0].cpu(), expected[0].cpu()) < 1e-6
    assert all(torch.equal(a, b) for a, b in zip(got[1:], expected[1:]))


@pytest.mark.parametrize("device", DEVICES)
def test_a_dispatch_mode_records_the_op_after_a_cached_call(device: str) -> None:
    """make_fx traces through a dispatch mode: the op must reach the dispatcher, or the graph would silently lack it."""
    x = torch.randn(2, 16, 5, device=device)
    l2norm(x, dim=1)  # the signature is remembered (on CUDA: a direct kernel call)
    graph = make_fx(lambda t: l2norm(t, dim=1) * 2)(x)
    targets = [n.target for n in graph.graph.nodes if n.op == "call_function"]
    assert torch.ops.torchtrt_ext.l2norm.default in targets
    assert rel_err(graph(x * 3).cpu(), 2 * F.normalize(x.cpu().double(), dim=1, eps=1e-6)) < 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_vmap_over_the_op_matches_the_batched_call(device: str) -> None:
    """Under a functorch transform the inputs are wrappers of plain type: the op goes through the dispatcher."""
    x = torch.randn(3, 16, 5, device=device)
    l2norm(x[0], dim=0)
    batched = torch.func.vmap(lambda t: l2norm(t, dim=0))(x)  # torch's per-sample fallback: the op has no vmap rule
    assert rel_err(batched.cpu(), l2norm(x, dim=1).cpu()) < 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_forward_mode_ad_is_refused_not_silently_dropped(device: str) -> None:
    """The op has no jvp: a dual input would give an output without tangent. It raises, after a cached call too."""
    import torch.autograd.forward_ad as fwAD

    x = torch.randn(1, 8, 3, 3, device=device)
    expected = l2norm(x, dim=1)  # the signature is cached
    with fwAD.dual_level():
        assert torch.equal(l2norm(x, dim=1), expected)  # plain inputs still run inside dual_level()
        with pytest.raises(InvalidInputError, match="input 'x' carries a forward-mode AD tangent.*backward"):
            l2norm(fwAD.make_dual(x, torch.ones_like(x)), dim=1)


@pytest.mark.parametrize("value", [2.0**-150, -(2.0**-150), 1e-50, float(np.nextafter(2.0**-150, 1)), 1.4e-45,
                                   float(np.finfo(np.float32).max), 2.0**128 - 2.0**103, -(2.0**128 - 2.0**103),
                                   float(np.nextafter(2.0**128 - 2.0**103, 0)), 1e39, 0.0, 1e-6, float("inf")])
def test_the_float32_check_agrees_with_numpy(value: float) -> None:
    """The check (plain floats, so dynamo can trace it) refuses exactly the values numpy's float32 makes 0 or inf."""
    with np.errstate(over="ignore"):
        as32 = float(np.float32(value))
    lost = np.isfinite(value) and (as32 == 0) != (value == 0) or np.isfinite(value) != np.isfinite(as32)
    attr = Attr("scale", "float")
    if lost:
        with pytest.raises(InvalidAttributeError, match=rf"does not survive float32.*it would become {as32!r}\."):
            attr.validate("Op", value)
    else:
        assert attr.validate("Op", value) == value


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
