"""cleanup: identities, constant and shape folding, dead nodes; custom nodes untouched; same numbers."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import torchtrt_ext.ops  # noqa: F401  (defines L2Norm: its schema lets shape inference pass through it)
from torchtrt_ext.ops.spec import get_op
from torchtrt_ext.passes.cleanup import cleanup

IR_VERSION = 10  # what the exporters write; onnxruntime 1.30 (on the GPU machine) reads IR versions up to 13 only

ort = pytest.importorskip("onnxruntime")


def _model() -> onnx.ModelProto:
    """x -> Identity -> Add(const computed from constants) -> L2Norm -> Identity -> y, plus shape math and dead nodes."""
    l2norm = get_op("L2Norm").spec.make_node(["a"], ["n"], name="l2norm", axis=1, eps=1e-6)
    nodes = [
        helper.make_node("Identity", ["x"], ["x1"], name="id_in"),
        helper.make_node("Constant", [], ["c1"], name="c1", value=numpy_helper.from_array(np.arange(4, dtype=np.float32))),
        helper.make_node("Constant", [], ["c2"], name="c2", value=numpy_helper.from_array(np.float32(2.0))),
        helper.make_node("Mul", ["c1", "c2"], ["c3"], name="const_mul"),
        helper.make_node("Add", ["x1", "c3"], ["a"], name="add"),
        l2norm,
        helper.make_node("Shape", ["n"], ["s"], name="shape"),  # static: folds to a constant
        helper.make_node("Reshape", ["n", "s"], ["r"], name="reshape"),
        helper.make_node("Identity", ["r"], ["y"], name="id_out"),
        helper.make_node("Relu", ["x"], ["dead"], name="dead_relu"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 4])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [3, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("torchtrt_ext", 1)],
                             ir_version=IR_VERSION)


def test_cleanup_folds_removes_and_keeps_custom_nodes():
    from torchtrt_ext.passes.decompose import decompose_custom_ops

    model = _model()
    out = cleanup(model)
    onnx.checker.check_model(out)
    ops = [n.op_type for n in out.graph.node]
    assert ops.count("L2Norm") == 1 and out.graph.node[ops.index("L2Norm")].domain == "torchtrt_ext"
    assert "Identity" not in ops and "Relu" not in ops and "Mul" not in ops and "Shape" not in ops, ops
    assert [o.name for o in out.graph.output] == ["y"] and [i.name for i in out.graph.input] == ["x"]
    assert {v.name for v in out.graph.value_info} >= {"a"}, "shapes are re-inferred"
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)

    def run(m: onnx.ModelProto) -> np.ndarray:
        return ort.InferenceSession(decompose_custom_ops(m).SerializeToString()).run(None, {"x": x})[0]

    np.testing.assert_allclose(run(out), run(model), rtol=1e-6)
    assert len(model.graph.node) == 10, "the input model is not modified"


def test_identity_between_input_and_output_is_kept():
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2])])
    out = cleanup(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION))
    assert [n.op_type for n in out.graph.node] == ["Identity"]


def test_cleanup_of_an_exported_model_keeps_its_numbers():
    import io

    import torch

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.normalize(x, dim=1) * x.shape[-1] + torch.arange(4.0)

    buffer = io.BytesIO()
    torch.onnx.export(Net(), (torch.randn(2, 4),), buffer, dynamo=False, opset_version=18, do_constant_folding=False,
                      input_names=["x"])
    model = onnx.load_from_string(buffer.getvalue())
    out = cleanup(model)
    assert len(out.graph.node) < len(model.graph.node)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    got = ort.InferenceSession(out.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
