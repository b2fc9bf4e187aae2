"""infer_shapes: torchtrt_ext nodes get their outputs' shapes and dtypes from their op's rule (checked against the
eager op and onnxruntime), inference flows on through standard ops, and a model over protobuf's 2 GiB limit is
inferred without its weights (PROTOBUF_LIMIT lowered here, so no test writes 2 GiB)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import torchtrt_ext
from tests.helpers import run_onnx
from torchtrt_ext.ops import DOMAIN
from torchtrt_ext.ops.deform_conv2d import SPEC as DEFORM
from torchtrt_ext.ops.l2norm import SPEC as L2NORM
from torchtrt_ext.passes import decompose_custom_ops, infer_shapes
from torchtrt_ext.passes import shapes as shapes_module

OPSETS = [helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)]


def _types(model: onnx.ModelProto) -> dict[str, tuple[int, list[int | str]]]:
    """name -> (elem_type, dims) of every typed value the graph records."""
    values = list(model.graph.value_info) + list(model.graph.output)
    return {v.name: (v.type.tensor_type.elem_type,
                     [d.dim_value if d.HasField("dim_value") else d.dim_param for d in v.type.tensor_type.shape.dim])
            for v in values if v.type.tensor_type.HasField("shape")}


def _l2norm_then_relu(dtype: int, x_shape: list[int | str] | None) -> onnx.ModelProto:
    nodes = [L2NORM.make_node(["x"], ["y"], name="norm", axis=1), helper.make_node("Relu", ["y"], ["z"], name="relu"),
             helper.make_node("Neg", ["z"], ["out"], name="neg")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dtype, x_shape)],
                              [helper.make_tensor_value_info("out", dtype, None)])
    return helper.make_model(graph, opset_imports=OPSETS)


@pytest.mark.parametrize("dtype", [T.FLOAT, T.FLOAT16])
def test_custom_outputs_are_typed_and_inference_flows_on(dtype: int) -> None:
    inferred = infer_shapes(_l2norm_then_relu(dtype, ["N", 8, 4, 4]))
    types = _types(inferred)
    assert types["y"] == (dtype, ["N", 8, 4, 4])  # the custom node: from L2Norm's rule, batch kept symbolic
    assert types["z"] == (dtype, ["N", 8, 4, 4])  # the Relu after it: onnx's own inference, reached through it


def test_an_input_without_a_shape_leaves_the_custom_node_untyped() -> None:
    inferred = infer_shapes(_l2norm_then_relu(T.FLOAT, None))
    assert "y" not in _types(inferred) and "z" not in _types(inferred)


@pytest.mark.parametrize("stride", [1, 2])
def test_deform_conv2d_outputs_match_the_eager_op_and_onnxruntime(stride: int) -> None:
    shapes = {"input": [2, 4, 9, 9], "offset": [2, 18, (9 - 1) // stride + 1, (9 - 1) // stride + 1],
              "weight": [6, 4, 3, 3], "bias": [6]}
    nodes = [DEFORM.make_node(list(shapes), ["y"], name="dcn", stride=[stride, stride], padding=[1, 1]),
             helper.make_node("Identity", ["y"], ["out"], name="copy")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, T.FLOAT, s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info("out", T.FLOAT, ["a", "b", "c", "d"])])
    inferred = infer_shapes(helper.make_model(graph, opset_imports=OPSETS))
    feeds = {n: torch.randn(s) for n, s in shapes.items()}
    eager = torchtrt_ext.ops.deform_conv2d(*feeds.values(), stride=stride, padding=1)
    (ran,) = run_onnx(decompose_custom_ops(inferred), feeds)
    assert _types(inferred)["y"] == (T.FLOAT, list(eager.shape)) and list(ran.shape) == list(eager.shape)


def _matmul_with_large_weight() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.random.rand(64, 512).astype(np.float32), "w")  # above weightless' small size
    shape = numpy_helper.from_array(np.array([-1, 8, 64], np.int64), "shape")  # small: inference reads its values
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Reshape", ["h", "shape"], ["r"], name="reshape"),
             L2NORM.make_node(["r"], ["n"], name="norm", axis=2), helper.make_node("Identity", ["n"], ["out"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [4, 64])],
                              [helper.make_tensor_value_info("out", T.FLOAT, ["a", "b", "c"])], [weight, shape])
    return helper.make_model(graph, opset_imports=OPSETS)


def test_weightless_keeps_small_initializers_and_feeds_large_ones_as_inputs() -> None:
    model = _matmul_with_large_weight()
    light = shapes_module.weightless(model)
    assert [i.name for i in light.graph.initializer] == ["shape"]
    assert [(i.name, [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim]) for i in light.graph.input] \
        == [("x", [4, 64]), ("w", [64, 512])]
    x = torch.randn(4, 64)
    weight = torch.from_numpy(numpy_helper.to_array(model.graph.initializer[0]).copy())
    (full,) = run_onnx(decompose_custom_ops(model), {"x": x})
    (fed,) = run_onnx(decompose_custom_ops(light), {"x": x, "w": weight})
    np.testing.assert_array_equal(full, fed)


def test_a_model_over_the_limit_is_inferred_in_place_without_its_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _types(infer_shapes(_matmul_with_large_weight()))
    assert expected["n"] == (T.FLOAT, [4, 8, 64])  # the reshape read its small shape initializer
    model = _matmul_with_large_weight()
    assert not shapes_module.too_big(model)
    monkeypatch.setattr(shapes_module, "PROTOBUF_LIMIT", model.ByteSize())  # this model is "2 GiB" now
    assert shapes_module.too_big(model)
    inferred = infer_shapes(model)
    assert inferred is model and _types(inferred) == expected
    assert [i.name for i in inferred.graph.initializer] == ["w", "shape"]  # the weights stay in the model
