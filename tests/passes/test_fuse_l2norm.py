"""fuse_l2norm on graphs exported from plain PyTorch by both exporters: one L2Norm per normalization, same numbers."""
from __future__ import annotations

import io
import logging
import math
import warnings

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F

from torchtrt_ext.passes.fuse_l2norm import NO_CLAMP_EPS, fuse_l2norm, fuse_l2norm_with_report

ort = pytest.importorskip("onnxruntime")


# name -> (f(x, dim), the clamp the graph holds: ("norm", e) clamps the norm, ("sum", e) clamps the sum of squares)
SPELLINGS = {
    "x/x.norm": (lambda x, d: x / x.norm(dim=d, keepdim=True), None),
    "F.normalize": (lambda x, d: F.normalize(x, dim=d), ("norm", 1e-12)),
    "F.normalize(eps=1e-4)": (lambda x, d: F.normalize(x, dim=d, eps=1e-4), ("norm", 1e-4)),
    "x/norm.clamp_min": (lambda x, d: x / x.norm(dim=d, keepdim=True).clamp(min=1e-6), ("norm", 1e-6)),
    "x*rsqrt(sum(x*x))": (lambda x, d: x * torch.rsqrt((x * x).sum(d, keepdim=True)), None),
    "x*rsqrt(sum(x*x).clamp_min(e*e))": (
        lambda x, d: x * torch.rsqrt((x * x).sum(d, keepdim=True).clamp_min(1e-12)), ("sum", 1e-12)),
    "x/sqrt(sum(x**2))": (lambda x, d: x / torch.sqrt((x ** 2).sum(d, keepdim=True)), None),
    "x/linalg.vector_norm": (lambda x, d: x / torch.linalg.vector_norm(x, dim=d, keepdim=True), None),
}
# (shape, dim): ranks 2 to 5, negative and positive axes
SHAPES = [((6, 16), 1), ((2, 8, 5), -1), ((2, 12, 3, 4), 1), ((2, 3, 4, 5, 6), -3)]
DTYPES = {torch.float32: (np.float32, 1e-5), torch.float16: (np.float16, 2e-3)}


class _Fn(torch.nn.Module):
    def __init__(self, fn, *args) -> None:
        super().__init__()
        self.fn, self.args = fn, args

    def forward(self, x: torch.Tensor):
        return self.fn(x, *self.args)


def export(module: torch.nn.Module, x: torch.Tensor, exporter: str, opset: int, dynamic_batch: bool = False):
    """Plain torch.onnx.export, legacy (TorchScript) or dynamo."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            dynamic = ({0: torch.export.Dim("batch")},) if dynamic_batch else None
            program = torch.onnx.export(module, (x,), dynamo=True, opset_version=opset, dynamic_shapes=dynamic,
                                        verbose=False)
            return program.model_proto
        buffer = io.BytesIO()
        torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=opset, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}} if dynamic_batch else None)
        return onnx.load_from_string(buffer.getvalue())


def run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})


def assert_same_numbers(original: onnx.ModelProto, fused: onnx.ModelProto, x: np.ndarray, tol: float) -> None:
    from torchtrt_ext.passes.decompose import decompose_custom_ops

    for want, got in zip(run(original, x), run(decompose_custom_ops(fused), x)):
        want, got = want.astype(np.float64), got.astype(np.float64)
        assert want.shape == got.shape
        err = np.abs(want - got).max() / max(np.abs(want).max(), 1e-30)
        assert err < tol, f"relative error {err:.3g} >= {tol}"


def expected_eps(clamp, np_dtype) -> float:
    if clamp is None:
        return NO_CLAMP_EPS
    where, value = clamp
    stored = float(np_dtype(value))  # the exporter stores eps in the tensor's dtype (1e-12 is 0 in FP16)
    if stored == 0.0:
        return NO_CLAMP_EPS
    return math.sqrt(stored) if where == "sum" else stored


def l2norm_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "L2Norm" and n.domain == "torchtrt_ext"]


def attrs(node: onnx.NodeProto) -> dict:
    values = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in values.items()}


def check_single_fusion(original: onnx.ModelProto, shape: tuple, dim: int, clamp, dtype: torch.dtype) -> None:
    np_dtype, tol = DTYPES[dtype]
    fused = fuse_l2norm(original)
    onnx.checker.check_model(fused)
    assert [n.op_type for n in fused.graph.node] == ["L2Norm"], [n.op_type for n in fused.graph.node]
    node = l2norm_nodes(fused)[0]
    got = attrs(node)
    assert got["axis"] == dim % len(shape)
    assert got["eps"] == pytest.approx(expected_eps(clamp, np_dtype), rel=1e-3)
    assert got["plugin_version"] == "1" and got["plugin_namespace"] == "torchtrt_ext"
    assert ("torchtrt_ext", 1) in {(o.domain, o.version) for o in fused.opset_import}
    fresh = np.random.default_rng(7).standard_normal(shape).astype(np_dtype)
    assert_same_numbers(original, fused, fresh, tol)


# every spelling x dtype x rank at opsets 17 and 21; opsets 18-20 (same graphs as 21) once each in FP32
LEGACY_CASES = [(name, dtype, case, opset) for name in SPELLINGS for dtype in DTYPES for case in SHAPES
                for opset in (17, 21)]
LEGACY_CASES += [(name, torch.float32, SHAPES[1], opset) for name in SPELLINGS for opset in (18, 19, 20)]


@pytest.mark.parametrize("spelling,dtype,case,opset", LEGACY_CASES,
                         ids=[f"{n}-{str(d)[6:]}-rank{len(c[0])}dim{c[1]}-opset{o}" for n, d, c, o in LEGACY_CASES])
def test_legacy_exporter_each_spelling_fuses_to_one_node(spelling, dtype, case, opset):
    shape, dim = case
    fn, clamp = SPELLINGS[spelling]
    x = torch.randn(shape, dtype=dtype)
    check_single_fusion(export(_Fn(fn, dim), x, "legacy", opset), shape, dim, clamp, dtype)


DYNAMO_CASES = [(name, torch.float32, 18, SHAPES[i % len(SHAPES)]) for i, name in enumerate(SPELLINGS)]
DYNAMO_CASES += [(name, torch.float16, 21, SHAPES[(i + 1) % len(SHAPES)]) for i, name in enumerate(SPELLINGS)
                 if name in ("F.normalize", "x*rsqrt(sum(x*x))", "x/sqrt(sum(x**2))", "x/norm.clamp_min")]


@pytest.mark.parametrize("spelling,dtype,opset,case", DYNAMO_CASES,
                         ids=[f"{n}-{str(d)[6:]}-opset{o}" for n, d, o, _ in DYNAMO_CASES])
def test_dynamo_exporter_each_spelling_fuses_to_one_node(spelling, dtype, opset, case):
    shape, dim = case
    fn, clamp = SPELLINGS[spelling]
    x = torch.randn(shape, dtype=dtype)
    check_single_fusion(export(_Fn(fn, dim), x, "dynamo", opset), shape, dim, clamp, dtype)


class _Many(torch.nn.Module):
    """Every spelling at once, on different axes, mixed with ordinary layers."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        # each on its own (non-zero) tensor: the legacy exporter would otherwise share (CSE) squares and norms between them,
        # and a shared intermediate is a near miss by design
        outs = [fn(y + (i + 1), dim) for i, ((fn, _), dim) in enumerate(zip(SPELLINGS.values(), [1, -1, 2, 1, -2, 3, 1, -3]))]
        return sum(outs) + y


@pytest.mark.parametrize("exporter,opset", [("legacy", 17), ("dynamo", 17), ("dynamo", 20)])
def test_every_normalization_in_a_model_fuses_and_the_rest_is_untouched(exporter, opset):
    x = torch.randn(2, 8, 6, 5)
    original = export(_Many().eval(), x, exporter, opset)
    default_opset = next(o.version for o in original.opset_import if o.domain in ("", "ai.onnx"))
    assert default_opset == (max(opset, 18) if exporter == "dynamo" else opset), "dynamo's minimum opset is 18"
    fused, report = fuse_l2norm_with_report(original)
    assert len(l2norm_nodes(fused)) == len(SPELLINGS) == len(report.fused)
    assert not report.unfused
    left = {n.op_type for n in fused.graph.node}
    assert not left & {"ReduceL2", "ReduceSum", "Sqrt", "Reciprocal", "Clip", "Expand", "Div"}, left
    replaced = {name for f in report.fused for name in f.replaced}
    kept = [n for n in original.graph.node if n.name not in replaced and n.op_type not in ("Constant", "Shape")]
    assert kept and all(n in fused.graph.node for n in kept), "the rest must stay exactly as exported"
    assert_same_numbers(original, fused, np.random.default_rng(3).standard_normal((2, 8, 6, 5)).astype(np.float32),
                        1e-5)


@pytest.mark.parametrize("exporter,opset", [("legacy", 17), ("legacy", 21), ("dynamo", 18)])
def test_dynamic_batch_keeps_the_expand_provably_harmless(exporter, opset):
    original = export(_Fn(lambda x: F.normalize(x, dim=-1)), torch.randn(2, 8, 4), exporter, opset,
                      dynamic_batch=True)
    assert "Expand" in {n.op_type for n in original.graph.node}
    fused = fuse_l2norm(original)
    assert [n.op_type for n in fused.graph.node] == ["L2Norm"]
    assert_same_numbers(original, fused, np.random.default_rng(1).standard_normal((5, 8, 4)).astype(np.float32), 1e-5)


def test_no_clamp_fuses_with_the_smallest_normal_eps_and_a_zero_vector_gives_zero_not_nan():
    """The one documented difference: x / ||x|| is NaN for an all-zero vector, L2Norm (eps > 0) gives 0."""
    from torchtrt_ext.passes.decompose import decompose_custom_ops

    original = export(_Fn(SPELLINGS["x/x.norm"][0], 1), torch.randn(3, 4), "legacy", 17)
    fused = fuse_l2norm(original)
    assert attrs(l2norm_nodes(fused)[0])["eps"] == NO_CLAMP_EPS == np.finfo(np.float32).tiny
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    x[1] = 0.0
    x[2] *= 1e-15  # a tiny norm that is still a normal float32 is normalized exactly as before
    want, got = run(original, x)[0], run(decompose_custom_ops(fused), x)[0]
    assert np.isnan(want[1]).all() and (got[1] == 0).all()
    np.testing.assert_allclose(got[[0, 2]], want[[0, 2]], rtol=1e-6)


def test_clamped_normalize_keeps_zero_vectors_at_zero():
    from torchtrt_ext.passes.decompose import decompose_custom_ops

    original = export(_Fn(lambda x: F.normalize(x, dim=1)), torch.randn(3, 4), "legacy", 18)
    x = np.zeros((3, 4), np.float32)
    np.testing.assert_array_equal(run(decompose_custom_ops(fuse_l2norm(original)), x)[0], run(original, x)[0])


NEAR_MISSES = {
    "two axes": lambda x: x / x.norm(dim=(1, 2), keepdim=True),
    "no keepdims": lambda x: x / x.norm(dim=1).unsqueeze(1),
    "norm used elsewhere": lambda x: (x / x.norm(dim=1, keepdim=True), x.norm(dim=1, keepdim=True) * 2),
    "clamped norm used elsewhere": lambda x: _two_uses(x.norm(dim=1, keepdim=True).clamp(min=1e-6), x),
    "squares used elsewhere": lambda x: _squares_used(x),
    "p=1": lambda x: x / x.norm(p=1, dim=1, keepdim=True),
    "p=3": lambda x: x / x.norm(p=3, dim=1, keepdim=True),
    "F.normalize p=1": lambda x: F.normalize(x, p=1.0, dim=1),
    "eps inside the root": lambda x: x / torch.sqrt((x ** 2).sum(1, keepdim=True) + 1e-6),
    "eps inside rsqrt": lambda x: x * torch.rsqrt((x * x).sum(1, keepdim=True) + 1e-6),
    "eps added to the norm": lambda x: x / (x.norm(dim=1, keepdim=True) + 1e-6),
    "clamp with an upper bound": lambda x: x / x.norm(dim=1, keepdim=True).clamp(1e-6, 10.0),
    "another numerator": lambda x: x.flip(0) / x.norm(dim=1, keepdim=True),
    "sum of squares without root": lambda x: x / (x * x).sum(1, keepdim=True),
}
REPORTED = {"two axes", "norm used elsewhere", "clamped norm used elsewhere", "squares used elsewhere",
            "eps inside the root", "eps inside rsqrt", "clamp with an upper bound", "another numerator"}


def _two_uses(norm: torch.Tensor, x: torch.Tensor):
    return x / norm, norm.sum()


def _squares_used(x: torch.Tensor):
    squares = x * x
    return x * torch.rsqrt(squares.sum(1, keepdim=True)), squares


@pytest.mark.parametrize("exporter,opset", [("legacy", 17), ("legacy", 21), ("dynamo", 18)])
def test_near_misses_are_left_exactly_as_exported(exporter, opset):
    if exporter == "dynamo":  # the dynamo exporter is slow: check the cases whose graphs differ most
        cases = {k: NEAR_MISSES[k] for k in ("two axes", "norm used elsewhere", "p=3", "eps inside rsqrt")}
    else:
        cases = NEAR_MISSES
    for name, fn in cases.items():
        original = export(_Fn(fn), torch.randn(2, 6, 4), exporter, opset)
        fused, report = fuse_l2norm_with_report(original)
        assert not report.fused, name
        assert fused.SerializeToString() == original.SerializeToString(), f"{name}: the graph changed"
        if name in REPORTED:
            assert len(report.unfused) == 1, name
        elif exporter == "legacy":
            assert not report.unfused, (name, report.unfused)


RUNTIME_UPPER_BOUNDS = {
    # an upper clamp whose bound is a tensor computed from the input: the graph holds Clip(norm, eps, <tensor>)
    "norm clamped to mean|x|": lambda x: x / x.norm(dim=1, keepdim=True).clamp(min=1e-6, max=x.abs().mean()),
    "sum clamped to mean|x|": lambda x: x * torch.rsqrt((x * x).sum(1, keepdim=True).clamp(min=1e-12,
                                                                                           max=x.abs().mean())),
}


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
@pytest.mark.parametrize("name", list(RUNTIME_UPPER_BOUNDS))
def test_a_clip_with_an_upper_bound_computed_at_run_time_does_not_fuse(exporter, name):
    """L2Norm has no upper clamp: fusing would drop it. The values below make the clamp bite (every norm is above
    the bound), so a fused graph would give other numbers in onnxruntime."""
    from torchtrt_ext.passes.decompose import decompose_custom_ops

    original = export(_Fn(RUNTIME_UPPER_BOUNDS[name]), torch.randn(3, 8), exporter, 18)
    clip = next(n for n in original.graph.node if n.op_type == "Clip")
    assert len(clip.input) == 3 and not any(i.name == clip.input[2] for i in original.graph.initializer)
    fused, report = fuse_l2norm_with_report(original)
    assert not report.fused and not l2norm_nodes(fused)
    assert len(report.unfused) == 1 and report.unfused[0].reasons == (f"Clip {clip.name!r} also clamps from above",)
    x = np.random.default_rng(3).standard_normal((3, 8)).astype(np.float32)
    want, got = run(original, x)[0], run(decompose_custom_ops(fused), x)[0]
    unclamped = x / np.linalg.norm(x, axis=1, keepdims=True)  # what a fused L2Norm would give
    assert np.abs(want - unclamped).max() > 0.1  # the clamp changes the result on these values
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_inputs_l2norm_does_not_take_stay_unfused():
    double = export(_Fn(SPELLINGS["F.normalize"][0], 1), torch.randn(2, 6, dtype=torch.float64), "legacy", 17)
    fused, report = fuse_l2norm_with_report(double)
    assert not report.fused and "float64" in report.unfused[0].reasons[0]
    rank1 = export(_Fn(SPELLINGS["x/x.norm"][0], 0), torch.randn(6), "legacy", 17)
    fused, report = fuse_l2norm_with_report(rank1)
    assert not report.fused and "rank 1" in report.unfused[0].reasons[0]


def test_near_miss_reasons_say_why():
    original = export(_Fn(NEAR_MISSES["eps inside the root"]), torch.randn(2, 6), "legacy", 17)
    _, report = fuse_l2norm_with_report(original)
    assert "inside the square root" in report.unfused[0].reasons[0]
    original = export(_Fn(NEAR_MISSES["two axes"]), torch.randn(2, 6, 4), "legacy", 18)
    assert "2 axes" in fuse_l2norm_with_report(original)[1].unfused[0].reasons[0]
    original = export(_Fn(NEAR_MISSES["norm used elsewhere"]), torch.randn(2, 6), "legacy", 18)
    assert "also used by" in fuse_l2norm_with_report(original)[1].unfused[0].reasons[0]


def test_fusion_is_logged_with_node_names(caplog):
    original = export(_Fn(lambda x: (F.normalize(x, dim=1), x / torch.sqrt((x * x).sum(1, keepdim=True) + 1.0))),
                      torch.randn(2, 6), "legacy", 17)
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        fused = fuse_l2norm(original)
    assert len(l2norm_nodes(fused)) == 1
    assert f"fused 1 L2 normalizations: {l2norm_nodes(fused)[0].name}" in caplog.text
    assert "left unfused" in caplog.text and "inside the square root" in caplog.text


def test_a_graph_without_normalization_is_returned_unchanged():
    original = export(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), torch.randn(2, 4), "legacy", 17)
    fused, report = fuse_l2norm_with_report(original)
    assert fused.SerializeToString() == original.SerializeToString()
    assert fused is not original
    assert report.summary() == "fused 0 L2 normalizations"
