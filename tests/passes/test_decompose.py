"""decompose_custom_ops on a model without a default-domain opset: a clear error naming the remedy."""
from __future__ import annotations

import pytest
from onnx import TensorProto as T
from onnx import helper

import torchtrt_ext.ops  # noqa: F401  (defines L2Norm)
from torchtrt_ext.errors import InvalidInputError
from torchtrt_ext.ops._spec import get_op
from torchtrt_ext.passes import decompose_custom_ops
from torchtrt_ext.passes.onnx_util import default_opset


def _model(opsets: list[tuple[str, int]]):
    node = get_op("L2Norm").spec.make_node(["x"], ["y"], name="l2norm", axis=1, eps=1e-6)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def test_default_opset_reads_the_default_domain_only() -> None:
    assert default_opset(_model([("torchtrt_ext", 1), ("", 18)])) == 18
    assert default_opset(_model([("torchtrt_ext", 1)])) is None


def test_decompose_without_default_opset_names_the_remedy() -> None:
    with pytest.raises(InvalidInputError, match="imports no opset of the default ONNX domain.*make_opsetid"):
        decompose_custom_ops(_model([("torchtrt_ext", 1)]))


def test_decompose_replaces_the_custom_node() -> None:
    out = decompose_custom_ops(_model([("", 17), ("torchtrt_ext", 1)]))
    assert out.graph.node and all(n.domain in ("", "ai.onnx") for n in out.graph.node)


def _if_model():
    """y = L2Norm(x) if cond else x, the custom node inside the If's then-branch (a subgraph)."""
    norm = get_op("L2Norm").spec.make_node(["x"], ["then_y"], name="inner_l2norm", axis=1, eps=1e-6)
    then_branch = helper.make_graph([norm], "then", [], [helper.make_tensor_value_info("then_y", T.FLOAT, [2, 3])])
    same = helper.make_node("Identity", ["x"], ["else_y"], name="keep")
    else_branch = helper.make_graph([same], "else", [], [helper.make_tensor_value_info("else_y", T.FLOAT, [2, 3])])
    branch = helper.make_node("If", ["cond"], ["y"], name="choose", then_branch=then_branch, else_branch=else_branch)
    graph = helper.make_graph([branch], "g", [helper.make_tensor_value_info("cond", T.BOOL, []),
                                              helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("torchtrt_ext", 1)])


def test_a_custom_node_inside_an_if_body_is_decomposed() -> None:
    import torch

    from tests.helpers import rel_err, run_onnx
    from torchtrt_ext.passes.onnx_util import all_nodes

    model = _if_model()
    out = decompose_custom_ops(model)
    assert [n.op_type for n in all_nodes(model) if n.domain == "torchtrt_ext"] == ["L2Norm"]
    assert [n for n in all_nodes(out) if n.domain not in ("", "ai.onnx")] == []
    x = torch.randn(2, 3)
    (taken,) = run_onnx(out, {"cond": torch.tensor(True), "x": x})
    (skipped,) = run_onnx(out, {"cond": torch.tensor(False), "x": x})
    assert rel_err(taken, torch.nn.functional.normalize(x, dim=1, eps=1e-6)) < 1e-6 and rel_err(skipped, x) == 0


def test_op_types_limits_what_is_decomposed() -> None:
    model = _model([("", 17), ("torchtrt_ext", 1)])
    assert decompose_custom_ops(model, op_types=["SomethingElse"]).graph.node == model.graph.node
