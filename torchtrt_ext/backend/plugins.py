"""How custom nodes reach TensorRT: the C++ plugin library, the Python plugins, or their decomposition.

``plugins=`` modes:

- ``"cpp"``: load ``libtorchtrt_ext_plugins.so`` into TensorRT's plugin registry (IPluginV3 creators);
- ``"python"``: register the same ops as TensorRT Python plugins (``backend/python_plugins.py``);
- ``"decompose"``: replace every torchtrt_ext node by standard ONNX ops (no plugin needed, slower);
- ``"auto"``: C++ when the library is built, else Python; on TensorRT-RTX always ``"decompose"`` (logged).

TensorRT-RTX aborts the whole process when a node maps to any plugin, so with that backend ``"cpp"`` and
``"python"`` raise before the parser sees the graph, and ``assert_plugin_free`` refuses, as a last line, any graph
with a node outside the standard ONNX operator set.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import onnx

from torchtrt_ext import _native
from torchtrt_ext.backend.adapter import TRTApi
from torchtrt_ext.backend.python_plugins import complete_optional_inputs, register_python_plugins
from torchtrt_ext.errors import (
    BuildError,
    InvalidInputError,
    LibraryNotFoundError,
    TorchTRTExtError,
    failure,
)
from torchtrt_ext.ops._spec import DOMAIN
from torchtrt_ext.passes.decompose import decompose_custom_ops

log = logging.getLogger("torchtrt_ext.backend")

PLUGIN_MODES = ("auto", "cpp", "python", "decompose")
STANDARD_DOMAINS = ("", "ai.onnx")


@dataclasses.dataclass(frozen=True)
class PluginPlan:
    """What the build does about custom nodes. ``mode`` is "cpp", "python", "decompose" or "none" (no custom nodes)."""

    mode: str
    library: Path | None = None
    library_sha256: str | None = None
    ops: tuple[tuple[str, str, str], ...] = ()  # (op_type, plugin_version, plugin_namespace) per custom op used

    @property
    def needs_plugins(self) -> bool:
        return self.mode in ("cpp", "python")


def _walk(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _walk(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _walk(sub)


def all_nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node: the main graph, subgraphs (If/Loop/Scan bodies) and model-local functions."""
    yield from _walk(model.graph)
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


def plugin_ops(model: onnx.ModelProto) -> tuple[tuple[str, str, str], ...]:
    """(op_type, plugin_version, plugin_namespace) for each distinct custom op in the model, sorted."""
    return tuple(sorted({(n.op_type, node_attr(n, "plugin_version", "1"), node_attr(n, "plugin_namespace", DOMAIN))
                         for n in custom_nodes(model)}))


def non_standard_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Nodes the ONNX parser would hand to its plugin importer: any domain other than the standard one, or a
    standard-domain op type ONNX does not define. Calls of model-local functions are fine (the parser inlines them;
    their bodies are checked instead)."""
    local = {(f.domain, f.name) for f in model.functions}
    bad = []
    for node in all_nodes(model):
        if (node.domain, node.op_type) in local:
            continue
        if node.domain not in STANDARD_DOMAINS or not onnx.defs.has(node.op_type):
            bad.append(node)
    return bad


def assert_plugin_free(model: onnx.ModelProto, api: TRTApi) -> None:
    """Last line of defence: on a backend that aborts on plugin nodes, refuse any graph that could contain one."""
    if api.supports_plugins:
        return
    bad = non_standard_nodes(model)
    if bad:
        listed = "; ".join(f"{n.name or '<unnamed>'} ({n.domain or 'ai.onnx'}::{n.op_type})" for n in bad[:20])
        more = f" and {len(bad) - 20} more" if len(bad) > 20 else ""
        ours = any(n.domain == DOMAIN for n in bad)  # after plugins='decompose', only foreign nodes are left
        raise BuildError(failure(
            f"refusing to give {api.name} a graph with {len(bad)} non-standard node(s): {listed}{more}",
            f"only standard ONNX operators, because {api.name} aborts the whole process when a node maps to a plugin",
            ("build with plugins='decompose' (torchtrt_ext nodes are then replaced by standard ops), replace other "
             "custom nodes at export, or use backend='tensorrt' with the plugin library") if ours else
            ("map these ops to standard ONNX ops at export (or define them with torchtrt_ext.ops.define_op, with a "
             "decomposition), or use backend='tensorrt' with a plugin library registering them")))


def resolve_plugin_mode(requested: str, api: TRTApi, model: onnx.ModelProto) -> PluginPlan:
    """Decide how the custom nodes of ``model`` reach ``api``; raise before any parsing when it cannot work."""
    if requested not in PLUGIN_MODES:
        raise InvalidInputError(failure(f"plugins={requested!r} is not a plugin mode", f"one of {PLUGIN_MODES}",
                                        "pass plugins='auto'"))
    if not api.supports_plugins:
        if requested in ("cpp", "python"):
            raise BuildError(failure(
                f"plugins={requested!r} cannot be used with backend={api.name!r}",
                f"plugins='decompose' or 'auto' on {api.name}: it aborts the whole process when a graph contains "
                "any plugin node",
                "pass plugins='decompose' (or 'auto', which decomposes on tensorrt_rtx), or backend='tensorrt' for "
                "the plugin path"))
        if requested == "auto" and plugin_ops(model):
            log.info("plugins='auto' on %s: using 'decompose' (custom nodes become standard ONNX ops; TensorRT-RTX "
                     "cannot take plugin nodes)", api.name)
        requested = "decompose"
    ops = plugin_ops(model)
    if not ops:
        return PluginPlan("none")
    if requested == "decompose":
        return PluginPlan("decompose", ops=ops)
    if requested == "cpp":
        library = _native.plugin_library_path()  # LibraryNotFoundError carries the build remedy
        return PluginPlan("cpp", library, file_sha256(library), ops)
    if requested == "python":
        _register_python_once()  # raises with the reason when unavailable (no tensorrt.plugin, ...)
        return PluginPlan("python", ops=ops)
    # auto on a plugin-capable backend: C++ if built, else Python
    try:
        library = _native.plugin_library_path()
    except LibraryNotFoundError as cpp_error:
        try:
            _register_python_once()
        except TorchTRTExtError as py_error:
            raise BuildError(failure(
                f"plugins='auto' found no way to run {', '.join(o[0] for o in ops)} on {api.name}: C++: {cpp_error} "
                f"| Python: {py_error}", "the C++ plugin library or the Python plugins",
                "build the plugin library (pip install -e . with TensorRT headers), or pass plugins='decompose'"))
        log.info("plugins='auto': C++ plugin library not built, using the Python plugins for %s",
                 ", ".join(o[0] for o in ops))
        return PluginPlan("python", ops=ops)
    log.info("plugins='auto': using the C++ plugin library %s for %s", library, ", ".join(o[0] for o in ops))
    return PluginPlan("cpp", library, file_sha256(library), ops)


def python_plugins_entry() -> Callable[[], Any]:
    """The function registering the Python TensorRT plugins (it raises MissingDependencyError without TensorRT)."""
    return register_python_plugins


def prepare_graph(model: onnx.ModelProto, plan: PluginPlan) -> onnx.ModelProto:
    """The graph to parse: decomposed when the plan says so; with Python plugins, every optional input present (a
    tensorrt.plugin has a fixed input count: absent ones become empty placeholders); else unchanged."""
    if plan.mode == "python":
        return complete_optional_inputs(model)
    if plan.mode != "decompose":
        return model
    decomposed = decompose_custom_ops(model)
    log.info("decomposed %d torchtrt_ext node(s) (%s) into standard ONNX ops", len(custom_nodes(model)),
             ", ".join(o[0] for o in plan.ops))
    return decomposed


def load_plugins(api: TRTApi, plan: PluginPlan) -> None:
    """Make the plan's plugins visible to ``api``'s registry (once per process)."""
    if plan.mode == "cpp":
        assert plan.library is not None
        _load_library_once(api, str(plan.library))
    elif plan.mode == "python":
        _register_python_once()


@functools.lru_cache(maxsize=None)
def _load_library_once(api: TRTApi, path: str) -> None:
    try:
        api.load_plugin_library(path)
    except TorchTRTExtError:
        raise
    except Exception as exc:  # noqa: BLE001 - TensorRT raises plain RuntimeError/TypeError here
        raise LibraryNotFoundError(failure(
            f"TensorRT could not load the plugin library {path}: {exc}",
            "a plugin library built against this TensorRT version", "rebuild it here: pip install -e .")) from exc


@functools.lru_cache(maxsize=None)
def _register_python_once() -> None:
    python_plugins_entry()()


@functools.lru_cache(maxsize=16)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    stat = path.stat()
    return _sha256_cached(str(path), stat.st_size, stat.st_mtime_ns)
