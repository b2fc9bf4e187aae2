"""L2Norm: eager semantics and gradient, both exporters, decomposition in onnxruntime, bad inputs."""
from __future__ import annotations

import onnx
import pytest
import torch
import torch.nn.functional as F

import torchtrt_ext
from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError
from torchtrt_ext.ops import l2norm
from tests.helpers import node_attrs, op_types, rel_err, run_onnx, single_custom_node

EXPORTERS = ["legacy", "dynamo"]


class OpModel(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return l2norm(x * 2.0, dim=self.dim) + 1.0


class ModuleModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torchtrt_ext.nn.L2Norm(dim=1)

    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(img))


@pytest.mark.parametrize("shape,dim", [((4, 7), 1), ((2, 5, 3), -1), ((2, 8, 6, 5), 1), ((2, 3, 4, 5, 6), 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_eager_matches_normalize(shape: tuple, dim: int, dtype: torch.dtype) -> None:
    x = torch.randn(shape, dtype=dtype)
    ref = F.normalize(x.double(), dim=dim, eps=1e-6)
    tol = {torch.float32: 1e-6, torch.float16: 1e-3, torch.bfloat16: 1e-2}[dtype]
    assert l2norm(x, dim=dim).dtype == dtype
    assert rel_err(l2norm(x, dim=dim).double(), ref) < tol


def test_zero_vector_gives_zeros() -> None:
    x = torch.zeros(2, 4, 3)
    assert torch.equal(l2norm(x), torch.zeros_like(x))


def test_the_defaults_are_dim_1_and_eps_1e_6() -> None:
    x = torch.randn(2, 4, 3)
    x[0, :, 0] = 1e-8  # a norm below the default eps
    torch.testing.assert_close(l2norm(x).double(), F.normalize(x.double(), dim=1, eps=1e-6), rtol=1e-6, atol=1e-7)


def test_float16_accumulates_in_float32() -> None:
    """A float16 vector whose sum of squares overflows float16 (65504) is still normalized (the norm is computed in
    float32, as documented), not divided by inf."""
    x = torch.full((2, 1000, 3), 300.0, dtype=torch.float16)  # sum of squares 9e7
    got = l2norm(x)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), torch.full((2, 1000, 3), 1000 ** -0.5), rtol=1e-3, atol=1e-4)


def test_every_dim_of_the_allowed_range_works() -> None:
    x = torch.randn(2, 4, 3, dtype=torch.float32)
    for dim in range(-3, 3):  # the message's "Allowed: -3 to 2", both ends included
        torch.testing.assert_close(l2norm(x, dim=dim).double(), F.normalize(x.double(), dim=dim, eps=1e-6))


def test_bfloat16_results_are_rounded_once() -> None:
    """The norm stays in float32 until the division: a bfloat16 result is the exact normalization rounded once to
    bfloat16 (a norm rounded to bfloat16 first is off in about a quarter of these elements)."""
    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(0)).bfloat16()
    assert torch.equal(l2norm(x), F.normalize(x.double(), dim=1).bfloat16())


def test_shape_inference_passes_the_input_shape_and_type_through() -> None:
    from onnx import TensorProto, helper

    from torchtrt_ext.passes.shapes import infer_shapes

    node = torchtrt_ext.ops.get_op("L2Norm").spec.make_node(["x"], ["y"], axis=1)
    graph = helper.make_graph([node, helper.make_node("Neg", ["y"], ["z"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["N", 8, 3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT16, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("torchtrt_ext", 1)])
    (y,) = [v for v in infer_shapes(model).graph.value_info if v.name == "y"]
    assert y.type.tensor_type.elem_type == TensorProto.FLOAT16
    assert [d.dim_param or d.dim_value for d in y.type.tensor_type.shape.dim] == ["N", 8, 3]


def test_gradient_matches_normalize() -> None:
    x = torch.randn(3, 6, 5, requires_grad=True)
    weights = torch.randn(3, 6, 5)
    for dim in (1, -1):
        (got,) = torch.autograd.grad((l2norm(x, dim=dim) * weights).sum(), x)
        (ref,) = torch.autograd.grad((F.normalize(x, dim=dim, eps=1e-6) * weights).sum(), x)
        assert torch.allclose(got, ref, atol=1e-6), (got - ref).abs().max()


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_export_emits_one_plugin_node(exporter: str) -> None:
    model = ModuleModel().eval()
    onnx_model = torchtrt_ext.export_onnx(model, (torch.randn(2, 3, 16, 16),), exporter=exporter)
    node = single_custom_node(onnx_model)
    assert node.op_type == "L2Norm"
    assert node_attrs(node) == pytest.approx({"axis": 1, "eps": 1e-6, "plugin_version": b"1",
                                          "plugin_namespace": b"torchtrt_ext"})
    kinds = {t for _, t in op_types(onnx_model)}
    assert not kinds & {"ReduceL2", "Div", "ReduceSumSquare", "Sqrt"}
    assert ("torchtrt_ext", 1) in {(o.domain, o.version) for o in onnx_model.opset_import}
    assert [i.name for i in onnx_model.graph.input] == ["img"]
    assert onnx_model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    meta = {p.key: p.value for p in onnx_model.metadata_props}
    assert meta["torchtrt_ext.exporter"] == exporter
    onnx.checker.check_model(onnx_model, full_check=True)  # shape inference passes through the node


def test_both_exporters_agree_on_the_node() -> None:
    model = OpModel(dim=-1).eval()
    x = torch.randn(2, 4, 5)
    nodes = [single_custom_node(torchtrt_ext.export_onnx(model, (x,), exporter=e)) for e in EXPORTERS]
    assert [n.op_type for n in nodes] == ["L2Norm", "L2Norm"]
    assert node_attrs(nodes[0]) == node_attrs(nodes[1])
    assert node_attrs(nodes[0])["axis"] == 2  # a negative dim is stored normalized against the rank


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("shape,dim", [((3, 10), 1), ((2, 6, 7), -1), ((2, 16, 5, 4), 1), ((2, 3, 4, 5, 2), 3)])
def test_decomposition_matches_eager(exporter: str, shape: tuple, dim: int) -> None:
    model = OpModel(dim).eval()
    onnx_model = torchtrt_ext.export_onnx(model, (torch.randn(shape),), exporter=exporter)
    decomposed = torchtrt_ext.passes.decompose_custom_ops(onnx_model)
    assert all(d == "" for d, _ in op_types(decomposed))
    for batch in (shape[0], shape[0] + 3):  # also a batch size different from the exported one
        x = torch.randn((batch, *shape[1:]))
        (got,) = run_onnx(decomposed, {"x": x})
        assert rel_err(got, model(x)) < 1e-5


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_float16_export_decomposes(exporter: str) -> None:
    model = ModuleModel().eval().half()
    onnx_model = torchtrt_ext.export_onnx(model, (torch.randn(2, 3, 8, 8, dtype=torch.float16),), exporter=exporter)
    assert onnx_model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    x = torch.randn(3, 3, 8, 8, dtype=torch.float16)
    (got,) = run_onnx(torchtrt_ext.passes.decompose_custom_ops(onnx_model), {"img": x})
    ref = ModuleModel.forward(model.float(), x.float())  # float32 reference of the same weights
    assert got.dtype.name == "float16"
    assert rel_err(got, ref) < 2e-3


@pytest.mark.parametrize("kwargs,match", [
    ({"dim": 3}, r"dim=3 is out of range for a rank-3 input. Allowed: -3 to 2"),
    ({"dim": 1.5}, r"argument dim \(ONNX attribute 'axis'\) must be of type int"),
    ({"eps": 0.0}, r"eps=0.0 is not allowed. Allowed: a finite float > 0"),
    ({"eps": -1e-3}, r"eps=-0.001 is not allowed"),
    ({"eps": "small"}, r"eps must be of type float"),
])
def test_bad_attributes(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidAttributeError, match=match):
        l2norm(torch.randn(2, 3, 4), **kwargs)


def test_unknown_attribute() -> None:
    with pytest.raises(InvalidAttributeError, match=r"unknown attribute\(s\) \['p'\]. Allowed: \['axis', 'eps'\]"):
        torchtrt_ext.ops.get_op("L2Norm")(torch.randn(2, 3), p=2)


def test_module_checks_attributes_at_construction() -> None:
    with pytest.raises(InvalidAttributeError, match="eps"):
        torchtrt_ext.nn.L2Norm(eps=0)


@pytest.mark.parametrize("x,match", [
    (torch.ones(2, 3, dtype=torch.int64), r"input 'x' has dtype torch.int64; allowed"),
    (torch.randn(5), r"rank >= 2, got shape \[5\]. Remedy: add a batch dimension"),
    ([1.0, 2.0], r"input 'x' must be a torch.Tensor, got list"),
])
def test_bad_inputs(x: object, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        l2norm(x)  # type: ignore[arg-type]


@pytest.mark.gpu
def test_cuda_call_paths_agree() -> None:
    """No-grad calls go straight to the kernel; autograd and torch.compile go through the dispatcher."""
    x = torch.randn(2, 64, 9, 7, device="cuda")
    with torch.no_grad():
        direct = l2norm(x)
    through_autograd = l2norm(x.clone().requires_grad_())
    compiled = torch.compile(lambda t: l2norm(t), fullgraph=True)(x)
    assert torch.equal(direct, through_autograd.detach())
    assert torch.allclose(compiled, direct, atol=1e-6)
    assert rel_err(direct.cpu(), F.normalize(x.cpu().double(), dim=1, eps=1e-6)) < 1e-6


def _rows_around_eps(eps: float) -> torch.Tensor:
    """Rows along dim 1 whose norms lie below, at and above ``eps``: 0, eps/10, eps/2, eps, 3 eps, 10 eps."""
    direction = torch.nn.functional.normalize(torch.randn(6, 5, 3, dtype=torch.float64), dim=1)
    norms = torch.tensor([0.0, 0.1, 0.5, 1.0, 3.0, 10.0], dtype=torch.float64).view(6, 1, 1) * eps
    return direction * norms


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_a_non_default_eps_clamps_small_norms(eps: float) -> None:
    x = _rows_around_eps(eps)
    norms = x.norm(dim=1, keepdim=True)
    expected = x / norms.clamp_min(eps)  # below eps: divided by eps; at or above: by the norm itself
    for got in (l2norm(x.float(), dim=1, eps=eps), torchtrt_ext.nn.L2Norm(dim=1, eps=eps)(x.float())):
        torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(expected, F.normalize(x, dim=1, eps=eps))
    out_norms = l2norm(x.float(), dim=1, eps=eps).double().norm(dim=1)  # (row, column)
    torch.testing.assert_close(out_norms[3:], torch.ones(3, 3, dtype=torch.float64), rtol=1e-6, atol=0)  # unit
    torch.testing.assert_close(out_norms[:3], norms[:3, 0] / eps, rtol=1e-6, atol=1e-7)  # below eps: shrunk


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_non_default_eps_survives_export_and_decomposition(exporter: str) -> None:
    eps = 0.5
    model = torch.nn.Sequential(torchtrt_ext.nn.L2Norm(dim=1, eps=eps)).eval()
    onnx_model = torchtrt_ext.export_onnx(model, (torch.randn(6, 5, 3),), exporter=exporter)
    assert node_attrs(single_custom_node(onnx_model))["eps"] == pytest.approx(eps)
    x = _rows_around_eps(eps).float()
    (got,) = run_onnx(torchtrt_ext.passes.decompose_custom_ops(onnx_model), {onnx_model.graph.input[0].name: x})
    torch.testing.assert_close(torch.from_numpy(got).double(), F.normalize(x.double(), dim=1, eps=eps),
                               rtol=1e-6, atol=1e-7)
