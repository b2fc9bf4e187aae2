"""The precision pass (types decide on strongly typed TensorRT) and profile specs, checked with onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

import torchtrt_ext
from tests.helpers import run_onnx
from torchtrt_ext.passes.precision import apply_precision
from torchtrt_ext.backend.profiles import Profile, ShapeRange, normalize_profiles, profiles_from_example_shapes
from torchtrt_ext.errors import InvalidInputError


class Mixed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)
        self.norm = torchtrt_ext.nn.L2Norm(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.relu(self.conv(x))).softmax(1)


def _types(model: onnx.ModelProto) -> dict[str, int]:
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in list(g.input) + list(g.value_info) + list(g.output)}
    types.update({i.name: i.data_type for i in g.initializer})
    return types


@pytest.fixture(scope="module")
def mixed() -> tuple[torch.nn.Module, torch.Tensor, onnx.ModelProto]:
    torch.manual_seed(0)
    model, x = Mixed().eval(), torch.randn(2, 3, 8, 8)
    return model, x, torchtrt_ext.export_onnx(model, (x,))


@pytest.mark.parametrize(("precision", "low"), [("fp16", TensorProto.FLOAT16), ("bf16", TensorProto.BFLOAT16)])
def test_low_precision_keeps_sensitive_ops_and_custom_nodes_in_fp32(mixed: tuple, precision: str, low: int) -> None:
    _, _, exported = mixed
    result = apply_precision(exported, precision)
    decomposed = torchtrt_ext.passes.decompose_custom_ops(result.model)
    onnx.checker.check_model(decomposed, full_check=True)
    types = _types(decomposed)
    by_op = {n.op_type: n for n in decomposed.graph.node}
    assert types[by_op["Relu"].input[0]] == low
    # Conv has no bfloat16 in the ONNX schema of this opset: it stays FP32 rather than produce an invalid graph
    assert types[by_op["Conv"].input[1]] == (low if precision == "fp16" else TensorProto.FLOAT)
    assert types[by_op["CumSum"].input[0]] == TensorProto.FLOAT  # L2Norm's sum of squares
    assert types[by_op["Softmax"].input[0]] == TensorProto.FLOAT
    assert types["x"] == types["output"] == TensorProto.FLOAT  # the module's interface is unchanged
    assert set(result.fp32_nodes) >= {n.name for n in exported.graph.node if n.op_type in ("L2Norm", "Softmax")}


def test_fp16_graph_stays_close_to_eager(mixed: tuple) -> None:
    model, x, exported = mixed
    fp16 = torchtrt_ext.passes.decompose_custom_ops(apply_precision(exported, "fp16").model)
    (got,) = run_onnx(fp16, {"x": x})
    assert got.dtype == np.float32
    assert np.abs(got - model(x).detach().numpy()).max() < 1e-2


def test_fp32_and_as_exported_leave_an_fp32_graph_alone(mixed: tuple) -> None:
    _, _, exported = mixed
    assert apply_precision(exported, "as_exported").model is exported
    result = apply_precision(exported, "fp32")
    assert result.casts_added == 0
    assert [n.op_type for n in result.model.graph.node] == [n.op_type for n in exported.graph.node]


def test_profile_specs() -> None:
    (p,) = profiles_from_example_shapes({"x": (4, 3, 8, 8)})
    assert p["x"] == ShapeRange((1, 3, 8, 8), (4, 3, 8, 8), (32, 3, 8, 8))
    (p,) = profiles_from_example_shapes({"x": (64, 3, 8, 8), "n": ()}, max_batch=32)
    assert p["x"].max[0] == 64 and p["n"] == ShapeRange((), (), ())
    (p,) = profiles_from_example_shapes({"x": (2, 3, 8, 8)}, {"x": {0: "b", 2: "h"}})
    assert p["x"].max == (32, 3, 16, 8)
    listed = normalize_profiles([{"x": ((1, 2), (1, 2), (2, 2))}, Profile({"x": ((3, 2), (3, 2), (4, 2))})])
    assert listed is not None and [q["x"].max for q in listed] == [(2, 2), (4, 2)]
    assert Profile.from_json(listed[0].to_json()) == listed[0]
    with pytest.raises(InvalidInputError, match="is not ordered"):
        ShapeRange((2, 3), (1, 3), (4, 3))
    with pytest.raises(InvalidInputError, match="mixes ranks"):
        ShapeRange((2, 3), (2, 3), (4,))
    with pytest.raises(InvalidInputError, match="profiles=\\[\\] is empty"):
        normalize_profiles([])


def test_fp16_computes_a_node_with_a_constant_beyond_its_range_in_fp32(caplog: pytest.LogCaptureFixture) -> None:
    """A 0-d initializer too large for FP16 (``x * 1e6``) is neither clipped (65504 would scale by the wrong factor)
    nor rounded to inf: its Mul computes in FP32, logged."""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Mul", ["x", "big"], ["y"], name="scale")], "g",
        [onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [onnx.numpy_helper.from_array(np.array(1e6, dtype=np.float32), "big")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    with caplog.at_level("INFO", logger="torchtrt_ext.backend"):
        result = apply_precision(model, "fp16")
    (big,) = result.model.graph.initializer
    assert big.data_type == TensorProto.FLOAT and "scale" in result.fp32_nodes
    assert "beyond the fp16 range" in caplog.text and "'scale'" in caplog.text
    (y,) = run_onnx(result.model, {"x": torch.tensor([1.0, -0.5])})
    assert y.dtype == np.float32 and y.tolist() == [1e6, -5e5]
