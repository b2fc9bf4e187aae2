"""Facts about an ONNX model shared by the passes, the backend and the doctor: the graph queries, the one subgraph
walker, the standard-domain set."""
from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Union

import onnx

from torchtrt_ext.errors import InvalidInputError, failure
from torchtrt_ext.ops.spec import DOMAIN

OnnxSource = Union[onnx.ModelProto, str, "os.PathLike[str]", bytes, bytearray]

FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                         onnx.TensorProto.DOUBLE})
"""ONNX element types of floating-point tensors."""

OUTPUT_TREE_KEY = "torchtrt_ext.output_tree"
"""The metadata_props entry in which export records the structure of the model's outputs (JSON, ``export.output_tree``)."""

STANDARD_DOMAINS = frozenset({"", "ai.onnx"})
"""The names of the default ONNX operator domain."""


def stored_output_tree(model: onnx.ModelProto) -> dict[str, Any] | None:
    """The output structure export recorded in ``model``'s metadata, or None where there is none or it no longer fits
    the graph (its leaf count is not the number of graph outputs: an edited graph; logged)."""
    text = next((p.value for p in model.metadata_props if p.key == OUTPUT_TREE_KEY), None)
    if text is None:
        return None
    try:
        tree: dict[str, Any] = json.loads(text)
    except ValueError:
        logging.getLogger("torchtrt_ext").warning("the model's %s is not JSON; outputs are returned flat",
                                                  OUTPUT_TREE_KEY)
        return None
    leaves = _leaf_count(tree)
    if leaves != len(model.graph.output):
        logging.getLogger("torchtrt_ext").warning(
            "the model's recorded output structure has %d leaves but the graph %d outputs (edited since export?); "
            "outputs are returned flat", leaves, len(model.graph.output))
        return None
    return tree


def _leaf_count(node: dict[str, Any]) -> int:
    return 1 if node.get("type") == "tensor" else sum(_leaf_count(item) for item in node.get("items", []))


def is_standard_domain(domain: str | None) -> bool:
    """Whether ``domain`` names the default ONNX operator set (onnx-graphsurgeon writes None for it)."""
    return domain is None or domain in STANDARD_DOMAINS


def default_opset(model: onnx.ModelProto) -> int | None:
    """The model's opset of the default ONNX domain; None when it imports none."""
    return next((e.version for e in model.opset_import if e.domain in STANDARD_DOMAINS), None)


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs held by ``node``'s attributes (If branches, Loop and Scan bodies)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def walk_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every graph nested in it, parents before their subgraphs: the walker every pass uses.

    A pass may rewrite a yielded graph's node list in place before the walker descends into it.
    """
    yield graph
    for node in graph.node:
        for sub in subgraphs(node):
            yield from walk_graphs(sub)


def all_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node: the main graph, subgraphs (If/Loop/Scan bodies) and model-local functions."""
    for graph in walk_graphs(model.graph):
        yield from graph.node
    for function in model.functions:
        yield from function.node


def custom_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The torchtrt_ext nodes of ``model`` (anywhere in it)."""
    return [n for n in all_nodes(model) if n.domain == DOMAIN]


def node_attr(node: onnx.NodeProto, name: str, default: str) -> str:
    """The attribute ``name`` of ``node`` as a string (``default`` when the node does not have it)."""
    for a in node.attribute:
        if a.name == name:
            value = onnx.helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else str(value)
    return default


def non_standard_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Nodes the ONNX parser would hand to its plugin importer: any domain other than the standard one, or a
    standard-domain op type ONNX does not define. Calls of model-local functions are fine (the parser inlines them;
    their bodies are checked instead), except torchtrt_ext nodes: a build runs them as planned (plugin or body)."""
    local = {(f.domain, f.name) for f in model.functions if f.domain != DOMAIN}
    return [node for node in all_nodes(model) if (node.domain, node.op_type) not in local
            and (not is_standard_domain(node.domain) or not onnx.defs.has(node.op_type))]


def read_onnx(source: OnnxSource, what: str = "the ONNX model") -> onnx.ModelProto:
    """A ModelProto from a ModelProto, a path or serialized bytes; InvalidInputError (naming the file) for a missing,
    empty, truncated or non-ONNX file, instead of protobuf's DecodeError or an empty model that reports nothing."""
    if isinstance(source, onnx.ModelProto):
        return source
    load: Callable[[], onnx.ModelProto]
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            raise InvalidInputError(failure(f"ONNX file {path} is a directory, not a file", "a path to a .onnx file",
                                            f"pass the .onnx file inside it (e.g. {path}/model.onnx)"))
        if not path.is_file():
            raise InvalidInputError(failure(f"ONNX file {path} does not exist", "a path to a .onnx file",
                                            "check the path, or pass the onnx.ModelProto itself"))
        name, load = str(path), lambda: onnx.load(str(path))
    elif isinstance(source, (bytes, bytearray)):
        name, load = "the ONNX bytes", lambda: onnx.load_from_string(bytes(source))
    else:
        raise InvalidInputError(failure(f"{what} is a {type(source).__name__}", "an onnx.ModelProto, a path or bytes",
                                        "export first: torchtrt_ext.export_onnx(model, example_inputs)"))
    remedy = "re-export the model (torchtrt_ext.export_onnx / torchtrt-ext export); check the path"
    try:
        model = load()
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, onnx's errors on external data, ...
        raise InvalidInputError(failure(f"{name} is not a readable ONNX model ({type(exc).__name__}: "
                                        f"{str(exc).strip()[:200]}); truncated or not ONNX", "an ONNX model file",
                                        remedy)) from None
    if not model.graph.node and not model.graph.output:
        raise InvalidInputError(failure(f"{name} holds no ONNX graph (empty or not an ONNX file)",
                                        "an ONNX model file with a graph", remedy))
    return model
