"""bind_plugin_namespaces: the torchtrt_ext nodes of the named op types, in every subgraph, name the plugin namespace
that will serve them; everything else, and the caller's model, stay as they were."""
from __future__ import annotations

import onnx
from onnx import TensorProto as T
from onnx import helper

from torchtrt_ext.ops import DOMAIN
from torchtrt_ext.ops.efficient_nms import SPEC as NMS
from torchtrt_ext.ops.l2norm import SPEC as L2NORM
from torchtrt_ext.passes import bind_plugin_namespaces
from torchtrt_ext.passes.onnx_util import node_attr, walk_graphs

OURS = {"EfficientNMS_TRT": DOMAIN}


def _nms_node(name: str) -> onnx.NodeProto:
    return NMS.make_node(["boxes", "scores"], [f"{name}_{o}" for o in NMS.outputs], name=name, max_output_boxes=10)


def _model(*nodes: onnx.NodeProto) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "g", [helper.make_tensor_value_info("boxes", T.FLOAT, [1, 8, 4]),
                                                 helper.make_tensor_value_info("scores", T.FLOAT, [1, 8, 3]),
                                                 helper.make_tensor_value_info("x", T.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info(nodes[0].output[0], T.INT32, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)])


def _namespaces(model: onnx.ModelProto) -> dict[str, str]:
    return {n.name: node_attr(n, "plugin_namespace", "<none>") for g in walk_graphs(model.graph) for n in g.node}


def test_a_bound_op_names_the_new_namespace_and_keeps_its_other_attributes() -> None:
    model = _model(_nms_node("nms"), L2NORM.make_node(["x"], ["y"], name="norm", axis=1))
    assert _namespaces(model) == {"nms": "", "norm": DOMAIN}  # TensorRT's own plugin lives in namespace ""
    bound = bind_plugin_namespaces(model, OURS)
    assert _namespaces(bound) == {"nms": DOMAIN, "norm": DOMAIN}
    before = {a.name: helper.get_attribute_value(a) for a in model.graph.node[0].attribute}
    after = {a.name: helper.get_attribute_value(a) for a in bound.graph.node[0].attribute}
    assert after == {**before, "plugin_namespace": DOMAIN.encode()}
    assert [a.name for a in bound.graph.node[0].attribute].count("plugin_namespace") == 1


def test_the_callers_model_is_copied_not_changed() -> None:
    model = _model(_nms_node("nms"))
    bound = bind_plugin_namespaces(model, OURS)
    assert bound is not model and _namespaces(model) == {"nms": ""}


def test_nothing_to_change_returns_the_same_model() -> None:
    model = _model(_nms_node("nms"))
    assert bind_plugin_namespaces(model, {"EfficientNMS_TRT": ""}) is model
    assert bind_plugin_namespaces(model, {"L2Norm": "elsewhere"}) is model  # no L2Norm node here
    assert bind_plugin_namespaces(model, {}) is model


def test_a_node_without_the_attribute_gets_it() -> None:
    node = _nms_node("nms")
    kept = [a for a in node.attribute if a.name != "plugin_namespace"]
    del node.attribute[:]
    node.attribute.extend(kept)
    bound = bind_plugin_namespaces(_model(node), OURS)
    assert _namespaces(bound) == {"nms": DOMAIN}


def test_other_domains_and_other_op_types_are_left_alone() -> None:
    foreign = helper.make_node("EfficientNMS_TRT", ["boxes", "scores"], ["f0", "f1", "f2", "f3"], name="foreign",
                               domain="other", plugin_namespace="")
    model = _model(_nms_node("nms"), foreign, L2NORM.make_node(["x"], ["y"], name="norm", axis=1))
    bound = bind_plugin_namespaces(model, {**OURS, "L2Norm": "renamed"})
    assert _namespaces(bound) == {"nms": DOMAIN, "foreign": "", "norm": "renamed"}


def test_nodes_inside_subgraphs_are_bound_too() -> None:
    def branch(tag: str) -> onnx.GraphProto:
        node = _nms_node(f"nms_{tag}")
        return helper.make_graph([node], tag, [], [helper.make_tensor_value_info(node.output[0], T.INT32, None)])

    choose = helper.make_node("If", ["cond"], ["num"], name="choose", then_branch=branch("then"),
                              else_branch=branch("else"))
    bound = bind_plugin_namespaces(_model(choose), OURS)
    assert _namespaces(bound) == {"choose": "<none>", "nms_then": DOMAIN, "nms_else": DOMAIN}
