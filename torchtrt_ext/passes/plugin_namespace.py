"""Point torchtrt_ext nodes at the plugin namespace that will serve them (the parser looks creators up by it)."""
from __future__ import annotations

from collections.abc import Mapping

import onnx

from torchtrt_ext.ops.spec import DOMAIN
from torchtrt_ext.passes.onnx_util import node_attr, walk_graphs


def bind_plugin_namespaces(model: onnx.ModelProto, namespaces: Mapping[str, str]) -> onnx.ModelProto:
    """``model`` with each torchtrt_ext node whose op type is in ``namespaces`` naming that ``plugin_namespace``.

    For an op bound to a plugin TensorRT provides (namespace "") that our own plugin serves instead, where TensorRT's
    plugin library does not exist. Returns ``model`` itself when no node changes, else a changed copy.
    """
    def stale(node: onnx.NodeProto) -> bool:
        return (node.domain == DOMAIN and node.op_type in namespaces
                and node_attr(node, "plugin_namespace", "<none>") != namespaces[node.op_type])

    if not any(stale(node) for graph in walk_graphs(model.graph) for node in graph.node):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # not through bytes: a model over 2 GiB cannot be serialized
    model = copy
    for graph in walk_graphs(model.graph):
        for node in filter(stale, graph.node):
            kept = [a for a in node.attribute if a.name != "plugin_namespace"]
            del node.attribute[:]
            node.attribute.extend(kept + [onnx.helper.make_attribute("plugin_namespace", namespaces[node.op_type])])
    return model
