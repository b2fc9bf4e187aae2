"""How custom nodes reach TensorRT: one routing policy per op (``route``), which the build gathers into a plan once
per build (``resolve_plugin_plan``) and the doctor reports node by node.

Each op is bound to its plugin by its definition (``OpSpec.plugin``: name, version, namespace, provider). ``plugins=``
picks the route of our own ops:

- ``"cpp"``: load ``libtorchtrt_ext_plugins.so`` into TensorRT's plugin registry (IPluginV3 creators);
- ``"python"``: register the same ops as TensorRT Python plugins (``backend/python_plugins.py``);
- ``"decompose"``: replace every torchtrt_ext node by standard ONNX ops (no plugin needed, slower);
- ``"auto"``: the Python plugins if this process registered them already, else C++ when the library is built, else
  Python; on TensorRT-RTX (C++ plugins only) C++ when the library is built, else ``"decompose"`` (logged). One process
  holds one of the two (see ``load_plugins``).

An op bound to a plugin TensorRT itself provides (``provider="tensorrt"``, e.g. ``EfficientNMS_TRT``) takes TensorRT's
plugin library (route ``"tensorrt"``) unless ``plugins="decompose"``. Where TensorRT's registry has no such creator
(TensorRT-RTX ships almost none of them), an op whose definition names a ``fallback_plugin`` of ours takes it (route
``"cpp"``; its nodes get our namespace), and ``"auto"`` decomposes the others. TensorRT-RTX's ONNX parser imports only
plugins whose creator is an ``IPluginCreatorV3One`` (our C++ library), not the ``tensorrt.plugin`` Python creators, so
with that backend ``"python"`` raises before the parser sees the graph.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable

import onnx

from torchtrt_ext import _native
from torchtrt_ext._files import file_sha256
from torchtrt_ext.backend.adapter import TRTApi
from torchtrt_ext.backend.engine import EngineMetadata
from torchtrt_ext.backend.plugin_plan import OpPlan, PluginPlan, Unserved
from torchtrt_ext.backend.python_plugins import register_python_plugins
from torchtrt_ext.errors import (
    BuildError,
    InvalidInputError,
    LibraryNotFoundError,
    TorchTRTExtError,
    failure,
)
from torchtrt_ext.ops.spec import DOMAIN, PROVIDER_OURS, PROVIDER_TENSORRT, PluginRef, registered_ops
from torchtrt_ext.passes import bind_plugin_namespaces, complete_optional_inputs, decompose_custom_ops
from torchtrt_ext.passes.functions import strip_functions
from torchtrt_ext.passes.onnx_util import custom_nodes, node_attr

log = logging.getLogger("torchtrt_ext.backend")

PLUGIN_MODES = ("auto", "cpp", "python", "decompose")


def plugin_ref(node: onnx.NodeProto) -> PluginRef:
    """The plugin binding of one torchtrt_ext node: name, version and namespace from the node, the provider from the
    op's definition (ours when the op is not defined in this process)."""
    op = registered_ops().get(node.op_type)
    provider = op.spec.plugin_ref.provider if op is not None else PROVIDER_OURS
    return PluginRef(node.op_type, node_attr(node, "plugin_version", "1"), node_attr(node, "plugin_namespace", DOMAIN),
                     provider)


def plugin_refs(model: onnx.ModelProto) -> tuple[PluginRef, ...]:
    """The plugin binding (``plugin_ref``) of each distinct torchtrt_ext op in ``model``, sorted."""
    refs = {plugin_ref(node) for node in custom_nodes(model)}
    return tuple(sorted(refs, key=lambda r: (r.name, r.version, r.namespace, r.provider)))


def _names(refs: tuple[PluginRef, ...]) -> str:
    return ", ".join(r.name for r in refs)


def _our_plugins() -> tuple[str, Path | None, str]:
    """What serves our own ops where plugins are possible: ("cpp", library, how) when the C++ library is built, else
    ("python", None, how) once the Python plugins are registered; raises ``_NoPlugins`` with both reasons."""
    try:
        library = _native.plugin_library_path()
    except LibraryNotFoundError as cpp_error:
        try:
            _register_python_once()
        except TorchTRTExtError as py_error:
            raise _NoPlugins(cpp_error, py_error) from None
        return "python", None, "Python plugins (tensorrt.plugin)"
    return "cpp", library, f"C++ plugin library {library}"


class _NoPlugins(Exception):
    """Neither the C++ library nor the Python plugins are available; both reasons kept."""

    def __init__(self, cpp_error: TorchTRTExtError, py_error: TorchTRTExtError) -> None:
        super().__init__(f"C++: {cpp_error} | Python: {py_error}")
        self.cpp_error, self.py_error = cpp_error, py_error


def _check_mode(requested: str) -> None:
    if requested not in PLUGIN_MODES:
        raise InvalidInputError(failure(f"plugins={requested!r} is not a plugin mode", f"one of {PLUGIN_MODES}",
                                        "pass plugins='auto'"))


def route(op: PluginRef, requested: str, api: TRTApi | None, backend: str | None = None) -> OpPlan | Unserved:
    """The one plugin routing policy: how the op ``op`` reaches TensorRT for ``plugins=requested`` on ``api``, or
    why nothing serves it. The build (``resolve_plugin_plan``) and the doctor both ask this.

    ``api``: the loaded backend; None where it is not installed (the doctor), ``backend`` then names it. May register
    the Python plugins (a route that takes them must know they work).
    """
    _check_mode(requested)
    name = api.name if api is not None else str(backend)
    if requested == "decompose":
        return OpPlan(op, "decompose", "plugins='decompose'")
    if op.provider == PROVIDER_TENSORRT:
        return _route_tensorrts(op, requested, api, name)
    if requested == "cpp":
        try:
            library = _native.plugin_library_path()
        except LibraryNotFoundError as exc:  # carries the build remedy
            return Unserved(op, str(exc), exc)
        return OpPlan(op, "cpp", f"C++ plugin library {library}")
    if requested == "python":
        try:
            _register_python_once()  # raises with the reason when unavailable (no tensorrt.plugin, ...)
        except TorchTRTExtError as exc:
            return Unserved(op, str(exc), exc)
        return OpPlan(op, "python", "Python plugins (tensorrt.plugin)")
    if not (api.supports_python_plugins if api is not None else name != "tensorrt_rtx"):  # auto on RTX: C++ or none
        try:
            library = _native.plugin_library_path()
        except LibraryNotFoundError as exc:
            log.info("plugins='auto' on %s: C++ plugin library not built, using 'decompose' for %s (%s)", name,
                     op.name, exc)
            return OpPlan(op, "decompose", f"build the C++ plugin library ({exc.remedy or exc}); TensorRT-RTX does "
                          "not take the Python plugins (it imports IPluginCreatorV3One creators only)")
        log.info("plugins='auto': using the C++ plugin library %s for %s", library, op.name)
        return OpPlan(op, "cpp", f"C++ plugin library {library}")
    if api is not None and registered_plugin_mode(api, [op]) == "python":
        log.info("plugins='auto': the Python plugins are registered in this process already; using them for %s",
                 op.name)
        return OpPlan(op, "python", "Python plugins (tensorrt.plugin), registered in this process already")
    try:
        taken, ours, how = _our_plugins()
    except _NoPlugins as exc:
        return Unserved(op, f"build the C++ plugin library ({exc.cpp_error.remedy or exc.cpp_error}), or install "
                            f"TensorRT >= 10.6 for the Python plugins ({exc.py_error.what})", BuildError(failure(
                                f"plugins='auto' found no way to run {op.name} on {name}: {exc}",
                                "the C++ plugin library or the Python plugins",
                                "build the plugin library (pip install -e . with TensorRT headers), or pass "
                                "plugins='decompose'")))
    if taken == "cpp":
        log.info("plugins='auto': using the C++ plugin library %s for %s", ours, op.name)
    else:
        log.info("plugins='auto': C++ plugin library not built, using the Python plugins for %s", op.name)
    return OpPlan(op, taken, how)


def _route_tensorrts(op: PluginRef, requested: str, api: TRTApi | None, name: str) -> OpPlan | Unserved:
    """``route`` for an op bound to a plugin TensorRT provides: TensorRT's plugin library where ``api``'s registry
    holds the exact creator; else our fallback plugin where the op has one and the library is built; else, with
    ``auto``, the decomposition."""
    if api is not None and _served_by_tensorrt(api, op):
        return OpPlan(op, "tensorrt", f"TensorRT's own plugin library ({api.name} {api.version})")
    fallback = fallback_plugin(op)
    missing = f"plugin {op.id} of TensorRT's own plugin library, which {name} does not register here"
    why = missing
    if fallback is not None and requested in ("auto", "cpp"):
        try:
            library = _native.plugin_library_path()
        except LibraryNotFoundError as exc:
            if requested == "cpp":
                return Unserved(op, f"{missing}, or our C++ plugin library ({exc.remedy or exc})", exc)
            why = f"{missing}, or our C++ plugin library ({exc.remedy or exc})"
        else:
            log.info("%s has no TensorRT plugin library: our C++ plugin %s serves %s", name, fallback.id, op.name)
            return OpPlan(fallback, "cpp", f"our C++ plugin {fallback.id} in {library} ({missing})")
    if requested == "auto":
        log.info("plugins='auto': %s has no TensorRT plugin library, decomposing %s", name, op.name)
        return OpPlan(op, "decompose", why)
    ours = "" if fallback is None else " or our C++ plugin library"
    version = f" {api.version}" if api is not None else ""
    return Unserved(op, why, BuildError(failure(
        f"plugins={requested!r}: {op.name} needs plugin {op.id} from TensorRT's own plugin library{ours}, "
        f"which {name}{version} does not register here",
        "a TensorRT with libnvinfer_plugin (tensorrt.init_libnvinfer_plugins)" + ours,
        "pass plugins='decompose' (or 'auto')" + (", or build the plugin library (pip install -e .)"
                                                  if fallback is not None else ""))))


def _served_by_tensorrt(api: TRTApi, ref: PluginRef) -> bool:
    """Whether TensorRT's own plugin library registers the creator ``ref`` names, here."""
    return api.tensorrt_plugin_creator(ref.name, ref.version, ref.namespace) is not None


def fallback_plugin(ref: PluginRef) -> PluginRef | None:
    """Our own C++ plugin standing in for ``ref``, an op bound to a plugin TensorRT provides, where TensorRT's plugin
    library does not exist (TensorRT-RTX): the op definition's ``fallback_plugin``, or None."""
    op = registered_ops().get(ref.name)
    return op.spec.fallback_plugin if op is not None and ref.provider == PROVIDER_TENSORRT else None


def resolve_plugin_plan(requested: str, api: TRTApi, model: onnx.ModelProto) -> PluginPlan:
    """Decide, once per build, how each custom op of ``model`` reaches ``api`` (``route`` per op); raise before any
    parsing when it cannot work. Registers the Python plugins when the plan takes them."""
    _check_mode(requested)
    if requested == "python" and not api.supports_python_plugins:
        raise BuildError(failure(
            f"plugins='python' cannot be used with backend={api.name!r}",
            f"C++ plugins on {api.name}: its ONNX parser imports IPluginV3 plugins registered with an "
            "IPluginCreatorV3One creator only, and tensorrt.plugin registers another kind",
            "pass plugins='cpp' (build libtorchtrt_ext_plugins.so: pip install -e .), 'auto' or 'decompose'"))
    refs = plugin_refs(model)
    if not refs:
        return PluginPlan("none")
    ops = []
    for ref in refs:
        planned = route(ref, requested, api)
        if isinstance(planned, Unserved):
            raise planned.error
        ops.append(planned)
    library = _native.plugin_library_path() if any(op.route == "cpp" for op in ops) else None
    ours = [op.route for ref, op in zip(refs, ops) if ref.provider == PROVIDER_OURS]
    routes = {op.route for op in ops}
    mode = ours[0] if ours else next((r for r in ("tensorrt", "cpp") if r in routes), "decompose")
    return PluginPlan(mode, library, file_sha256(library) if library else None, tuple(ops))


def plan_from_metadata(metadata: EngineMetadata) -> PluginPlan:
    """The plugin plan an engine was built with, as this machine can serve it: the one reader of the metadata's
    ``plugin_plan``, used by the runtime.

    An engine whose C++ plugins are not embedded points at this machine's plugin library (a warning when it differs
    from the one the engine was built with). Raises LibraryNotFoundError when that library is not built here.
    """
    recorded = metadata.plugin_plan
    built_with = metadata.target.plugin_library_sha256
    library, digest = None, built_with
    if any(op.route == "cpp" for op in recorded.ops) and not metadata.plugins_embedded:
        library = _native.plugin_library_path()
        digest = file_sha256(library)
        if built_with and digest != built_with:
            log.warning("plugin library %s differs from the one the engine was built with (sha256 %s..., built "
                        "with %s...); if loading fails, rebuild the engine", library, digest[:12], built_with[:12])
    return dataclasses.replace(recorded, library=library, library_sha256=digest)


def prepare_graph(model: onnx.ModelProto, plan: PluginPlan) -> onnx.ModelProto:
    """The graph to parse: the ops the plan runs as plugins without their ONNX functions (a parser that prefers a
    function over a registered plugin cannot take it), the ops it decomposes inlined with theirs; with Python plugins,
    every optional input present (a tensorrt.plugin has a fixed input count: absent ones become empty placeholders);
    nodes naming the plugin namespace of the planned plugin (ours, for an op bound to TensorRT's where that is
    absent)."""
    model = strip_functions(model, {op.op_type for op in plan.ops if op.route != "decompose"})
    model = bind_plugin_namespaces(model, {op.op_type: op.plugin.namespace for op in plan.ops
                                           if op.route != "decompose"})
    decomposed = plan.op_types("decompose")
    if decomposed:
        before = len(custom_nodes(model))
        model = decompose_custom_ops(model, op_types=decomposed)
        log.info("decomposed %d torchtrt_ext node(s) (%s) into standard ONNX ops", before - len(custom_nodes(model)),
                 ", ".join(decomposed))
    python = plan.op_types("python")
    return complete_optional_inputs(model, op_types=python) if python else model


def load_plugins(api: TRTApi, plan: PluginPlan) -> None:
    """Make the plan's plugins visible to ``api``'s registry (once per process).

    Refused when the other route registered our ops in this process already: the registry keeps the first creator of
    a name, so TensorRT would silently run the other plugin (after the C++ library, the Python plugins' registration is
    ignored) or loading fails (after the Python plugins, ``load_library`` returns None), and the engine's metadata
    would name the wrong mode.
    """
    routes = {op.route for op in plan.ops}
    for route in routes & {"cpp", "python"}:
        refs = [op.plugin for op in plan.ops if op.route == route]
        registered = registered_plugin_mode(api, refs)
        if registered not in (None, route):
            raise BuildError(failure(
                f"plugins={route!r}, but the {registered} plugins already registered {_names(tuple(refs))} in this "
                f"process's {api.name} plugin registry, which keeps the first creator of a name",
                "one plugin mode per process (the C++ library and the Python plugins register the same names)",
                f"use plugins={registered!r} (or 'auto', which takes the registered one) here, or run the "
                f"{route!r} build in a fresh process"))
    if plan.library is not None and "cpp" in routes:
        _load_library_once(api, str(plan.library))
    if "python" in routes:
        _register_python_once()
    missing = [op.plugin.id for op in plan.ops if op.route == "tensorrt" and not _served_by_tensorrt(api, op.plugin)]
    if missing:
        raise LibraryNotFoundError(failure(
            f"{api.name} {api.version} does not register {missing} from its own plugin library",
            "TensorRT's libnvinfer_plugin next to libnvinfer, with those plugins",
            "install a TensorRT that ships them, or rebuild with plugins='decompose'"))


def registered_plugin_mode(api: TRTApi, refs: Iterable[PluginRef]) -> str | None:
    """Which plugins ``api``'s registry answers the ops with: "python" (tensorrt.plugin creators), "cpp", or None."""
    get_registry = getattr(api.trt, "get_plugin_registry", None)
    if get_registry is None:
        return None
    quick = getattr(api.trt, "IPluginCreatorV3Quick", None)  # the base class of tensorrt.plugin's creators
    for ref in refs:
        creator = get_registry().get_creator(ref.name, ref.version, ref.namespace)
        if creator is not None:
            return "python" if quick is not None and isinstance(creator, quick) else "cpp"
    return None


def python_plugins_entry() -> Callable[[], Any]:
    """The function registering the Python TensorRT plugins (it raises MissingDependencyError without TensorRT)."""
    return register_python_plugins


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
