"""Replace torchtrt_ext nodes by their decomposition into standard ONNX ops (the portable fallback): each node is
inlined with its op's ONNX function (``ops.function``), the body the exporter writes into the file, so a build that
decomposes and a runtime that runs the file's function compute the same graph."""
from __future__ import annotations

from collections.abc import Collection

import onnx

from torchtrt_ext.errors import InvalidInputError, failure
from torchtrt_ext.ops.function import PLUGIN_ATTRIBUTES, input_pattern, op_function
from torchtrt_ext.ops.spec import DOMAIN, get_op
from torchtrt_ext.passes.functions import inline_call
from torchtrt_ext.passes.onnx_util import OnnxSource, custom_nodes, default_opset, read_onnx, walk_graphs
from torchtrt_ext.passes.shapes import too_big, weightless


_Generic = dict[tuple[str, tuple[bool, ...]], "onnx.FunctionProto | None"]  # (op_type, input pattern) -> its body


def _function(node: onnx.NodeProto, opset: int, generic: _Generic) -> onnx.FunctionProto:
    """The function to inline into ``node``: its op's generic one, or, for an op whose decomposition is not generic
    over its attributes, one specialised to this node's attributes (validated either way)."""
    spec = get_op(node.op_type).spec
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute if a.name not in PLUGIN_ATTRIBUTES}
    attrs = spec.validate_attrs({k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()})
    key = (node.op_type, input_pattern(node))
    if key not in generic:
        try:
            generic[key] = op_function(spec, opset, input_pattern(node))
        except Exception:  # noqa: BLE001 - not generic (a user's decomposer may fail on references any way)
            generic[key] = None
    return generic[key] or op_function(spec, opset, input_pattern(node), attrs)


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
    generic: _Generic = {}
    chosen = set()
    for graph in walk_graphs(out.graph):
        nodes: list[onnx.NodeProto] = []
        for index, node in enumerate(graph.node):
            if node.domain == DOMAIN and (op_types is None or node.op_type in op_types):
                chosen.add(node.op_type)
                prefix = node.name or f"{node.op_type}_{index}"
                nodes.extend(inline_call(node, _function(node, opset, generic), prefix))
            else:
                nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)
    functions = [f for f in out.functions if not (f.domain == DOMAIN and f.name in chosen)]
    del out.functions[:]
    out.functions.extend(functions)
    if not custom_nodes(out):
        kept = [e for e in out.opset_import if e.domain != DOMAIN]
        del out.opset_import[:]
        out.opset_import.extend(kept)
    onnx.checker.check_model(weightless(out) if too_big(out) else out)  # protobuf's 2 GiB limit
    return out
