"""Replace torchtrt_ext nodes by their decomposition into standard ONNX ops (the portable fallback)."""
from __future__ import annotations

from collections.abc import Collection

import onnx

from torchtrt_ext.errors import InvalidInputError, failure
from torchtrt_ext.ops.spec import DOMAIN, Decomposer, get_op
from torchtrt_ext.passes.onnx_util import OnnxSource, custom_nodes, default_opset, read_onnx, walk_graphs
from torchtrt_ext.passes.shapes import too_big, weightless


def _decomposed(node: onnx.NodeProto, index: int, opset: int) -> list[onnx.NodeProto]:
    """The standard-op nodes replacing one torchtrt_ext node."""
    spec = get_op(node.op_type).spec
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute
             if a.name not in ("plugin_version", "plugin_namespace")}
    attrs = spec.validate_attrs({k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()})
    builder = Decomposer(opset=opset, prefix=node.name or f"{node.op_type}_{index}")
    spec.decompose(builder, list(node.input), list(node.output), **attrs)
    return builder.nodes


def decompose_custom_ops(model: OnnxSource, *, op_types: Collection[str] | None = None) -> onnx.ModelProto:
    """Return a copy of ``model`` where every torchtrt_ext node is replaced by standard ONNX ops, in subgraphs
    (If/Loop/Scan bodies) too.

    The result runs on any ONNX runtime and on TensorRT without our plugins (slower than the plugin).

    Args:
        model: the ONNX model (a ModelProto, path or bytes); it is not modified.
        op_types: decompose only the nodes of these op types. Default: None (every torchtrt_ext node).
    """
    model = read_onnx(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    opset = default_opset(out)
    if opset is None:
        raise InvalidInputError(failure(
            "decompose_custom_ops: the model imports no opset of the default ONNX domain",
            "an opset_import entry for domain '' (every exported model has one)",
            "add one, e.g. model.opset_import.append(onnx.helper.make_opsetid('', 17))"))
    for graph in walk_graphs(out.graph):
        nodes: list[onnx.NodeProto] = []
        for index, node in enumerate(graph.node):
            chosen = node.domain == DOMAIN and (op_types is None or node.op_type in op_types)
            nodes.extend(_decomposed(node, index, opset) if chosen else [node])
        del graph.node[:]
        graph.node.extend(nodes)
    if not custom_nodes(out):
        kept = [e for e in out.opset_import if e.domain != DOMAIN]
        del out.opset_import[:]
        out.opset_import.extend(kept)
    onnx.checker.check_model(weightless(out) if too_big(out) else out)  # protobuf's 2 GiB limit
    return out
