"""Graph tidy-up before the build: identity removal, constant and shape folding, dead-node removal, shape inference.

The folding and dead-code work is onnx-graphsurgeon's (``Graph.fold_constants``, ``Graph.cleanup``,
``Graph.toposort``); this module only wires it up for graphs that hold torchtrt_ext (or other custom) nodes:
custom nodes are never evaluated while folding (onnxruntime cannot run them), and shapes are re-inferred through
them with ``passes.shapes.infer_shapes``. Identity removal is the one thing gs does not do, so it is done here.
"""
from __future__ import annotations

import importlib.util
import logging

import onnx
import onnx_graphsurgeon as gs

from torchtrt_ext.passes.onnx_util import OnnxSource, is_standard_domain, read_onnx

LOGGER = logging.getLogger("torchtrt_ext")


def _is_custom(node: gs.Node) -> bool:
    return not is_standard_domain(node.domain)


def _replace_input(consumer: gs.Node, old: gs.Tensor, new: gs.Tensor) -> None:
    for index, tensor in enumerate(consumer.inputs):
        if tensor is old:
            consumer.inputs[index] = new


def remove_identities(graph: gs.Graph) -> int:
    """Bypass the Identity nodes of ``graph``'s top level (names of graph inputs and outputs are kept).

    Returns how many were removed; run ``graph.cleanup()`` afterwards.
    """
    removed = 0
    outputs = {id(t) for t in graph.outputs}
    inputs = {id(t) for t in graph.inputs}
    for node in [n for n in graph.nodes if n.op == "Identity" and not _is_custom(n)]:
        if len(node.inputs) != 1 or len(node.outputs) != 1:
            continue
        src, dst = node.inputs[0], node.outputs[0]
        if id(dst) not in outputs:  # consumers read the source directly
            for consumer in list(dst.outputs):
                _replace_input(consumer, dst, src)
            node.outputs.clear()
            removed += 1
            continue
        producer = src.inputs[0] if len(src.inputs) == 1 else None
        if producer is None or id(src) in outputs or id(src) in inputs or isinstance(src, gs.Constant):
            continue  # e.g. output = Identity(input): the graph needs a node to keep both names
        for consumer in list(src.outputs):  # the producer writes the graph output itself
            if consumer is not node:
                _replace_input(consumer, src, dst)
        node.inputs.clear()
        node.outputs.clear()
        producer.outputs[producer.outputs.index(src)] = dst
        removed += 1
    return removed


def cleanup(model: OnnxSource, *, fold_constants: bool = True, infer_shapes: bool = True) -> onnx.ModelProto:
    """Return a tidied copy of ``model``: Identity nodes bypassed, constants and shapes folded, dead nodes and unused
    initializers removed, nodes topologically sorted, and value_info re-inferred (through torchtrt_ext nodes too).

    Args:
        model: the ONNX model (a ModelProto, path or bytes); it is not modified.
        fold_constants: evaluate constant subgraphs (with onnxruntime when installed; without it, only shape
            computations on static shapes are folded). Custom-domain nodes are never evaluated. Default: True.
        infer_shapes: run ``passes.shapes.infer_shapes`` on the result. Default: True.
    """
    from torchtrt_ext.passes.shapes import infer_shapes as _infer

    model = read_onnx(model)
    before = len(model.graph.node)
    graph = gs.import_onnx(_infer(model) if fold_constants else model)  # known shapes let gs fold Shape nodes
    identities = remove_identities(graph)
    graph.cleanup(remove_unused_graph_inputs=False)
    if fold_constants:
        if importlib.util.find_spec("onnxruntime") is None:
            LOGGER.info("cleanup: onnxruntime is not installed, so only shape computations are folded "
                        "(pip install onnxruntime to fold every constant subgraph)")
        graph.fold_constants(fold_shapes=True, error_ok=True, should_exclude_node=_is_custom)
    graph.cleanup(remove_unused_graph_inputs=False).toposort()
    out: onnx.ModelProto = gs.export_onnx(graph)
    if infer_shapes:
        out = _infer(out)
    LOGGER.info("cleanup: %d nodes -> %d (%d Identity removed)", before, len(out.graph.node), identities)
    return out
