"""Wiring errors of an ONNX graph that no backend can run: a node reading a tensor nothing provides. The doctor reports
them as "invalid graph" and ``OnnxRuntimeModule`` refuses them by name, so neither passes them on as an unsupported op
or a runtime crash."""
from __future__ import annotations

import onnx

from torchtrt_ext.errors import InvalidInputError, failure

REMEDY = ("fix the graph where it was made (re-export the model, or correct the edit that dropped the tensor); "
          "onnx.checker.check_model(model, full_check=True) names every such error")


def dangling_inputs(model: onnx.ModelProto) -> list[tuple[onnx.NodeProto, str]]:
    """(node, input name) for each input of a main-graph node that no graph input, initializer or node output
    provides, in graph order. Subgraphs read their outer scope, so only the main graph is checked."""
    graph = model.graph
    provided = {""} | {i.name for i in graph.input} | {i.name for i in graph.initializer}
    provided |= {i.name for i in graph.sparse_initializer if i.values.name} | {o for n in graph.node for o in n.output}
    return [(node, name) for node in graph.node for name in node.input if name not in provided]


def describe(node: onnx.NodeProto, name: str) -> str:
    """One dangling input in words."""
    return (f"node {node.name or '<unnamed ' + node.op_type + '>'} ({node.op_type}) reads {name!r}, which no graph "
            "input, initializer or node output provides")


def check_wiring(model: onnx.ModelProto, what: str = "the ONNX model") -> None:
    """Raise InvalidInputError naming the first dangling input of ``model`` (see ``dangling_inputs``)."""
    found = dangling_inputs(model)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise InvalidInputError(failure(f"{what} is not a valid graph: {describe(*found[0])}{more}",
                                        "every node input produced by a node, an initializer or a graph input",
                                        REMEDY))
