"""apply_precision keeps range- and accumulation-sensitive ops in FP32 at fp16/bf16: Exp (exp(12) = 162755 is past
float16's 65504) and CumSum (a float16 running sum of ones stops at 2048), each checked through the public
passes.apply_precision by the type the node computes in. (Not by running it: onnxruntime's CPU provider computes a
float16 Exp in float32 behind casts of its own, so the values would not show the difference.)"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from torchtrt_ext import passes

F32 = TensorProto.FLOAT


def one_op_model(op_type: str, extra_inputs: list[onnx.TensorProto] = ()) -> onnx.ModelProto:
    """y = Relu(op(x)) on a float32 [1, N] interface: the Relu may run low, op must not."""
    nodes = [helper.make_node(op_type, ["x", *(t.name for t in extra_inputs)], ["t"], name=op_type.lower()),
             helper.make_node("Relu", ["t"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [1, "N"])],
                              [helper.make_tensor_value_info("y", F32, [1, "N"])], list(extra_inputs))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    return model


def compute_type(model: onnx.ModelProto, node_name: str) -> int:
    """The element type the node named `node_name` reads (its first input), after strict ONNX shape inference."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*inferred.input, *inferred.value_info, *inferred.output]}
    node = next(n for n in inferred.node if n.name == node_name)
    return types[node.input[0]]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("op_type,extra", [
    ("Exp", []),
    ("CumSum", [numpy_helper.from_array(np.array(1, np.int64), "axis")]),
])
def test_sensitive_op_is_kept_in_fp32(op_type: str, extra: list, precision: str) -> None:
    result = passes.apply_precision(one_op_model(op_type, extra), precision)
    assert compute_type(result.model, op_type.lower()) == F32
    low = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[precision]
    assert compute_type(result.model, "relu") == low  # the pass did lower the graph around it

