"""The model-local functions of torchtrt_ext ops in a model: written at export (``add_functions``), dropped for ops a
build runs as plugins (``strip_functions``), inlined into a node (``inline_call``, what ``decompose_custom_ops`` does),
and checked against the op's own body (``function_findings``, for the doctor).
"""
from __future__ import annotations

import collections
import logging
from collections.abc import Collection, Iterable

import onnx

from torchtrt_ext.ops.function import input_pattern, op_function
from torchtrt_ext.ops.spec import DOMAIN, OpSpec, registered_ops
from torchtrt_ext.passes.onnx_util import default_opset, walk_graphs

log = logging.getLogger("torchtrt_ext")


def graph_custom_nodes(model: onnx.ModelProto) -> dict[str, list[onnx.NodeProto]]:
    """The torchtrt_ext nodes of the graph and its subgraphs (not of function bodies), by op_type."""
    nodes: dict[str, list[onnx.NodeProto]] = collections.defaultdict(list)
    for graph in walk_graphs(model.graph):
        for node in graph.node:
            if node.domain == DOMAIN:
                nodes[node.op_type].append(node)
    return dict(nodes)


def function_for_nodes(spec: OpSpec, nodes: Iterable[onnx.NodeProto], opset: int) -> onnx.FunctionProto:
    """The one generic function serving every node of ``nodes`` (all of op ``spec``). Raises ValueError when their
    optional inputs differ (a body can only use the inputs every caller passes) and ``BakedAttributeError`` when the
    op's decomposition is not generic over its attributes."""
    patterns = {input_pattern(node) for node in nodes}
    if len(patterns) > 1:
        raise ValueError(f"its nodes pass different optional inputs ({sorted(patterns)}), and one function body "
                         "can only use the inputs every node passes")
    return op_function(spec, opset, patterns.pop() if patterns else None)


def add_functions(model: onnx.ModelProto) -> dict[str, str]:
    """Add to ``model``, in place, one function per torchtrt_ext op type its graph uses (replacing any of that name);
    returns {op_type: why it has none} for the ops left without one (also logged as warnings)."""
    opset = default_opset(model)
    specs = {op.spec.name: op.spec for op in registered_ops().values()}
    functions, missing = {}, {}
    for op_type, nodes in sorted(graph_custom_nodes(model).items()):
        spec = specs.get(op_type)
        try:
            if spec is None or opset is None:
                raise ValueError("it is not defined in this process" if spec is None else "the model imports no "
                                 "default-domain opset")
            functions[op_type] = function_for_nodes(spec, nodes, opset)
        except Exception as exc:  # noqa: BLE001 - a user's decomposer may fail on attribute references any way
            missing[op_type] = f"{type(exc).__name__}: {exc}"
            log.warning("no ONNX function for %s: %s; its nodes run only where its plugin is loaded or after "
                        "passes.decompose_custom_ops", op_type, missing[op_type])
    kept = [f for f in model.functions if not (f.domain == DOMAIN and f.name in functions)]
    del model.functions[:]
    model.functions.extend(kept + [functions[name] for name in sorted(functions)])
    return missing


def strip_functions(model: onnx.ModelProto, op_types: Collection[str]) -> onnx.ModelProto:
    """``model`` without the functions of the torchtrt_ext ``op_types`` (a copy when one is dropped): a parser that
    prefers a function over a registered plugin cannot take it."""
    if not any(f.domain == DOMAIN and f.name in op_types for f in model.functions):
        return model
    out = onnx.ModelProto()
    out.CopyFrom(model)
    kept = [f for f in out.functions if not (f.domain == DOMAIN and f.name in op_types)]
    del out.functions[:]
    out.functions.extend(kept)
    return out


def inline_call(node: onnx.NodeProto, function: onnx.FunctionProto, prefix: str) -> list[onnx.NodeProto]:
    """The nodes of ``function``'s body instantiated for the call ``node``: formal inputs and outputs bound to the
    node's, attribute references to the node's attributes (or the function's defaults), every other name (values,
    node names, in subgraphs too) prefixed with ``prefix/`` so it stays unique in the calling graph."""
    names = dict(zip(function.input, list(node.input) + [""] * len(function.input)))
    names.update(zip(function.output, node.output))
    given = {a.name: a for a in function.attribute_proto}
    given.update((a.name, a) for a in node.attribute)

    def rename(name: str) -> str:
        return names.get(name, f"{prefix}/{name}") if name else ""

    def instantiate(body: Iterable[onnx.NodeProto]) -> list[onnx.NodeProto]:
        out = []
        for inner in body:
            copy = onnx.NodeProto()
            copy.CopyFrom(inner)
            copy.name = f"{prefix}/{inner.name}" if inner.name else ""
            copy.input[:] = [rename(n) for n in inner.input]
            copy.output[:] = [rename(n) for n in inner.output]
            del copy.attribute[:]
            for attribute in inner.attribute:
                if attribute.ref_attr_name:
                    if attribute.ref_attr_name not in given:
                        continue  # an optional attribute the caller leaves out: the op's own default applies
                    value = onnx.AttributeProto()
                    value.CopyFrom(given[attribute.ref_attr_name])
                    value.name = attribute.name
                    copy.attribute.append(value)
                    continue
                value = copy.attribute.add()
                value.CopyFrom(attribute)
                for graph in ([value.g] if value.type == onnx.AttributeProto.GRAPH else list(value.graphs)):
                    subgraph(graph)
            out.append(copy)
        return out

    def subgraph(graph: onnx.GraphProto) -> None:
        nodes = instantiate(graph.node)
        del graph.node[:]
        graph.node.extend(nodes)
        for value in list(graph.input) + list(graph.output) + list(graph.value_info):
            value.name = rename(value.name)
        for tensor in graph.initializer:
            tensor.name = rename(tensor.name)

    return instantiate(function.node)


def _body(function: onnx.FunctionProto) -> bytes:
    """What a function computes, for comparison: its signature and nodes, names of nodes and docs left out."""
    copy = onnx.FunctionProto()
    copy.CopyFrom(function)
    copy.doc_string = ""
    for node in copy.node:
        node.name, node.doc_string = "", ""
    body: bytes = copy.SerializeToString(deterministic=True)
    return body


def function_status(model: onnx.ModelProto) -> dict[str, str]:
    """For each torchtrt_ext op type of ``model``'s graph defined in this process: "ok" (the file's function is the
    op's own body), "missing", "altered" (it differs from the op's own body), or "none possible: <why>"."""
    opset = default_opset(model)
    specs = {op.spec.name: op.spec for op in registered_ops().values()}
    stored = {f.name: f for f in model.functions if f.domain == DOMAIN}
    status = {}
    for op_type, nodes in sorted(graph_custom_nodes(model).items()):
        if op_type not in specs or opset is None:
            continue
        try:
            own = function_for_nodes(specs[op_type], nodes, opset)
        except Exception as exc:  # noqa: BLE001 - as in add_functions
            status[op_type] = f"none possible: {type(exc).__name__}: {exc}"
            continue
        file_function = stored.get(op_type)
        status[op_type] = ("missing" if file_function is None else
                           "ok" if _body(file_function) == _body(own) else "altered")
    return status
