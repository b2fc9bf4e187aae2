"""complete_optional_inputs: torchtrt_ext nodes missing optional inputs get empty tensors of their first input's dtype
(checked on onnxruntime), in every subgraph, for the chosen op types only; the caller's model is not changed."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from torchtrt_ext.ops import DOMAIN
from torchtrt_ext.ops.deform_conv2d import SPEC as DEFORM
from torchtrt_ext.ops.l2norm import SPEC as L2NORM
from torchtrt_ext.passes import complete_optional_inputs
from torchtrt_ext.passes.onnx_util import walk_graphs

INPUTS = {"input": [1, 2, 5, 5], "offset": [1, 18, 5, 5], "weight": [3, 2, 3, 3], "bias": [3], "mask": [1, 9, 5, 5]}


def _model(nodes: list[onnx.NodeProto], dtype: int = T.FLOAT) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, dtype, s) for n, s in INPUTS.items()]
                              + [helper.make_tensor_value_info("cond", T.BOOL, [])],
                              [helper.make_tensor_value_info(nodes[-1].output[0], dtype, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)])


def _deform(inputs: list[str], name: str = "dcn") -> onnx.NodeProto:
    return DEFORM.make_node(inputs, [f"{name}_out"], name=name, padding=[1, 1])


def _node(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for g in walk_graphs(model.graph) for n in g.node if n.name == name)


@pytest.mark.parametrize("given", [3, 4])
def test_missing_optional_inputs_are_appended(given: int) -> None:
    names = list(INPUTS)[:given]
    completed = complete_optional_inputs(_model([_deform(names)]))
    node = _node(completed, "dcn")
    assert list(node.input[:given]) == names
    assert list(node.input[given:]) == ["dcn_absent"] * (5 - given)
    assert [n.op_type for n in completed.graph.node] == ["Constant", "CastLike", "DeformConv2d"]
    assert completed.graph.node[1].input[1] == "input"  # cast like the node's first input


@pytest.mark.parametrize("dtype", [T.FLOAT, T.FLOAT16])
def test_the_placeholder_is_an_empty_tensor_of_the_first_inputs_dtype(dtype: int) -> None:
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is needed (pip install 'torchtrt_ext[dev]')")
    completed = complete_optional_inputs(_model([_deform(["input", "offset", "weight"])], dtype))
    helpers = [n for n in completed.graph.node if n.domain != DOMAIN]  # the nodes that make the placeholder
    graph = helper.make_graph(helpers, "placeholder", [helper.make_tensor_value_info("input", dtype, [1, 2, 5, 5])],
                              [helper.make_tensor_value_info("dcn_absent", dtype, None)])
    session = ort.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
                                   .SerializeToString(), providers=["CPUExecutionProvider"])
    (absent,) = session.run(None, {"input": np.ones((1, 2, 5, 5), helper.tensor_dtype_to_np_dtype(dtype))})
    assert absent.shape == (0,) and absent.dtype == helper.tensor_dtype_to_np_dtype(dtype)


def test_complete_nodes_and_ops_without_optional_inputs_are_unchanged() -> None:
    model = _model([_deform(list(INPUTS)), L2NORM.make_node(["dcn_out"], ["y"], name="norm", axis=1)])
    assert complete_optional_inputs(model) == model


def test_the_callers_model_is_not_changed() -> None:
    model = _model([_deform(["input", "offset", "weight"])])
    before = model.SerializeToString()
    completed = complete_optional_inputs(model)
    assert model.SerializeToString() == before and len(_node(completed, "dcn").input) == 5


def test_only_the_chosen_op_types_are_completed() -> None:
    model = _model([_deform(["input", "offset", "weight"])])
    assert complete_optional_inputs(model, op_types={"L2Norm"}) == model
    assert len(_node(complete_optional_inputs(model, op_types={"DeformConv2d"}), "dcn").input) == 5


def test_a_node_of_another_domain_is_not_completed() -> None:
    foreign = helper.make_node("DeformConv2d", ["input", "offset", "weight"], ["out"], name="dcn", domain="other")
    model = _model([foreign])
    assert complete_optional_inputs(model) == model


def test_nodes_inside_subgraphs_are_completed_with_names_of_their_own() -> None:
    def branch(tag: str) -> onnx.GraphProto:
        node = _deform(["input", "offset", "weight"], name=f"dcn_{tag}")
        return helper.make_graph([node], tag, [], [helper.make_tensor_value_info(node.output[0], T.FLOAT, None)])

    choose = helper.make_node("If", ["cond"], ["out"], name="choose", then_branch=branch("then"),
                              else_branch=branch("else"))
    completed = complete_optional_inputs(_model([choose]))
    assert list(_node(completed, "dcn_then").input[3:]) == ["dcn_then_absent"] * 2
    assert list(_node(completed, "dcn_else").input[3:]) == ["dcn_else_absent"] * 2
    for branch_graph in completed.graph.node[0].attribute:  # each branch makes the placeholder it reads, first
        assert [n.op_type for n in branch_graph.g.node] == ["Constant", "CastLike", "DeformConv2d"]
