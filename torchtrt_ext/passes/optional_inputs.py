"""Give torchtrt_ext nodes every optional input, for plugins with a fixed input count (``tensorrt.plugin``)."""
from __future__ import annotations

from collections.abc import Collection

import onnx
from onnx import helper

from torchtrt_ext.ops.spec import DOMAIN, registered_ops
from torchtrt_ext.passes.onnx_util import walk_graphs


def complete_optional_inputs(model: onnx.ModelProto, *, op_types: Collection[str] | None = None) -> onnx.ModelProto:
    """A copy of ``model`` whose torchtrt_ext nodes have every optional input: missing ones become empty 1-D tensors of
    the node's first input's dtype (a Constant of shape [0] cast like it), which the Python plugins treat as absent.

    Needed because a ``tensorrt.plugin`` plugin has a fixed number of inputs. Nodes of ops without optional inputs,
    and complete nodes, are unchanged; so are nodes whose op type is not in ``op_types`` (default None: every op).
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # not through bytes: a model over 2 GiB cannot be serialized
    model = copy
    specs = {op.spec.name: op.spec for op in registered_ops().values()
             if op.spec.optional_inputs and (op_types is None or op.spec.name in op_types)}
    for graph in walk_graphs(model.graph):
        nodes = []
        for node in graph.node:
            spec = specs.get(node.op_type) if node.domain == DOMAIN else None
            missing = len(spec.inputs) - len(node.input) if spec is not None else 0
            if missing > 0:
                stem = f"{node.name or node.output[0]}_absent"
                nodes.append(helper.make_node("Constant", [], [f"{stem}_f32"], name=f"{stem}_const",
                                              value=helper.make_tensor(f"{stem}_value", 1, [0], [])))
                nodes.append(helper.make_node("CastLike", [f"{stem}_f32", node.input[0]], [stem], name=f"{stem}_cast"))
                node.input.extend([stem] * missing)
            nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)
    return model
