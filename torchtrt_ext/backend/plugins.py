"""How custom nodes reach TensorRT: one plan per op (``backend.plugin_plan``), resolved once per build.

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

import functools
import hashlib
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Callable

import onnx

from torchtrt_ext import _native
from torchtrt_ext.backend.adapter import TRTApi
from torchtrt_ext.backend.engine import EngineMetadata
from torchtrt_ext.backend.plugin_plan import OpPlan, PluginPlan
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


def plugin_refs(model: onnx.ModelProto) -> tuple[PluginRef, ...]:
    """The plugin binding of each distinct torchtrt_ext op in ``model``, sorted: name, version and namespace from the
    node, the provider from the op's definition (ours when the op is not defined in this process)."""
    specs = {op.spec.name: op.spec for op in registered_ops().values()}
    refs = set()
    for node in custom_nodes(model):
        spec = specs.get(node.op_type)
        provider = spec.plugin_ref.provider if spec is not None else PROVIDER_OURS
        refs.add(PluginRef(node.op_type, node_attr(node, "plugin_version", "1"),
                           node_attr(node, "plugin_namespace", DOMAIN), provider))
    return tuple(sorted(refs, key=lambda r: (r.name, r.version, r.namespace, r.provider)))


def plugin_ops(model: onnx.ModelProto) -> tuple[tuple[str, str, str], ...]:
    """(op_type, plugin_version, plugin_namespace) for each distinct custom op in the model, sorted."""
    return tuple((r.name, r.version, r.namespace) for r in plugin_refs(model))


def _names(refs: tuple[PluginRef, ...]) -> str:
    return ", ".join(r.name for r in refs)


def _our_plugins() -> tuple[str, Path | None, str]:
    """What serves our own ops where plugins are possible: ("cpp", library, how) when the C++ library is built, else
    ("python", None, how) once the Python plugins are registered; BuildError-worthy reasons raised as
    ``_NoPlugins``."""
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


def auto_route(ref: PluginRef, api: TRTApi | None, backend: str) -> tuple[str | None, str]:
    """The plugin route ``plugins="auto"`` gives the op ``ref`` on ``backend`` (``api``: its loaded TensorRT, None
    where it is not installed): (route, how), or (None, why no plugin serves it). What the doctor reports."""
    if ref.provider == PROVIDER_TENSORRT:
        if api is not None and _served_by_tensorrt(api, ref):
            return "tensorrt", f"TensorRT's own plugin library ({api.name} {api.version})"
        fallback = fallback_plugin(ref)
        missing = f"plugin {ref.id} of TensorRT's own plugin library, which {backend} does not register here"
        if fallback is None:
            return None, missing
        try:
            library = _native.plugin_library_path()
        except LibraryNotFoundError as exc:
            return None, f"{missing}, or our C++ plugin library ({exc.remedy or exc})"
        return "cpp", f"our C++ plugin {fallback.id} in {library} ({missing})"
    if backend == "tensorrt_rtx":
        try:
            return "cpp", f"C++ plugin library {_native.plugin_library_path()}"
        except LibraryNotFoundError as exc:
            return None, (f"build the C++ plugin library ({exc.remedy or exc}); TensorRT-RTX does not take the "
                          "Python plugins (it imports IPluginCreatorV3One creators only)")
    try:
        route, _, how = _our_plugins()
    except _NoPlugins as exc:
        return None, (f"build the C++ plugin library ({exc.cpp_error.remedy or exc.cpp_error}), or install "
                      f"TensorRT >= 10.6 for the Python plugins ({exc.py_error.what})")
    return route, how


def _our_route(requested: str, api: TRTApi, refs: tuple[PluginRef, ...]) -> tuple[str, Path | None]:
    """(route, C++ library or None) of our own ops for ``requested`` on a plugin-capable ``api``."""
    if requested == "decompose":
        return "decompose", None
    if requested == "cpp":
        return "cpp", _native.plugin_library_path()  # LibraryNotFoundError carries the build remedy
    if requested == "python":
        _register_python_once()  # raises with the reason when unavailable (no tensorrt.plugin, ...)
        return "python", None
    if not api.supports_python_plugins:  # auto on TensorRT-RTX: C++ or nothing
        try:
            cpp_library = _native.plugin_library_path()
        except LibraryNotFoundError as exc:
            log.info("plugins='auto' on %s: C++ plugin library not built, using 'decompose' for %s (%s)", api.name,
                     _names(refs), exc)
            return "decompose", None
        log.info("plugins='auto': using the C++ plugin library %s for %s", cpp_library, _names(refs))
        return "cpp", cpp_library
    if registered_plugin_mode(api, refs) == "python":
        log.info("plugins='auto': the Python plugins are registered in this process already; using them for %s",
                 _names(refs))
        return "python", None
    try:
        route, library, _ = _our_plugins()
    except _NoPlugins as exc:
        raise BuildError(failure(
            f"plugins='auto' found no way to run {_names(refs)} on {api.name}: {exc}",
            "the C++ plugin library or the Python plugins",
            "build the plugin library (pip install -e . with TensorRT headers), or pass plugins='decompose'")) from None
    if route == "cpp":
        log.info("plugins='auto': using the C++ plugin library %s for %s", library, _names(refs))
    else:
        log.info("plugins='auto': C++ plugin library not built, using the Python plugins for %s", _names(refs))
    return route, library


def _served_by_tensorrt(api: TRTApi, ref: PluginRef) -> bool:
    """Whether TensorRT's own plugin library registers the creator ``ref`` names, here."""
    return api.tensorrt_plugin_creator(ref.name, ref.version, ref.namespace) is not None


def fallback_plugin(ref: PluginRef) -> PluginRef | None:
    """Our own C++ plugin standing in for ``ref``, an op bound to a plugin TensorRT provides, where TensorRT's plugin
    library does not exist (TensorRT-RTX): the op definition's ``fallback_plugin``, or None."""
    op = registered_ops().get(ref.name)
    return op.spec.fallback_plugin if op is not None and ref.provider == PROVIDER_TENSORRT else None


def _tensorrt_ops(requested: str, api: TRTApi, refs: tuple[PluginRef, ...]) -> tuple[tuple[OpPlan, ...], Path | None]:
    """Plans of the ops bound to plugins TensorRT provides, and the C++ library if one takes our fallback: TensorRT's
    plugin library where ``api``'s registry holds the exact creator; else our fallback plugin where the op has one and
    the library is built; else, with ``auto``, the decomposition."""
    if requested == "decompose":
        return tuple(OpPlan(r, "decompose") for r in refs), None
    served = {r: _served_by_tensorrt(api, r) for r in refs}
    library = None
    if requested in ("auto", "cpp") and any(fallback_plugin(r) and not served[r] for r in refs):
        try:
            library = _native.plugin_library_path()
        except LibraryNotFoundError:
            if requested == "cpp":
                raise
    plans = []
    for ref in refs:
        fallback = fallback_plugin(ref)
        if served[ref]:
            plans.append(OpPlan(ref, "tensorrt"))
        elif fallback is not None and library is not None:
            log.info("%s has no TensorRT plugin library: our C++ plugin %s serves %s", api.name, fallback.id, ref.name)
            plans.append(OpPlan(fallback, "cpp"))
        elif requested == "auto":
            log.info("plugins='auto': %s has no TensorRT plugin library, decomposing %s", api.name, ref.name)
            plans.append(OpPlan(ref, "decompose"))
        else:
            ours = "" if fallback is None else " or our C++ plugin library"
            raise BuildError(failure(
                f"plugins={requested!r}: {ref.name} needs plugin {ref.id} from TensorRT's own plugin library{ours}, "
                f"which {api.name} {api.version} does not register here",
                "a TensorRT with libnvinfer_plugin (tensorrt.init_libnvinfer_plugins)" + ours,
                "pass plugins='decompose' (or 'auto')" + (", or build the plugin library (pip install -e .)"
                                                          if fallback is not None else "")))
    return tuple(plans), library


def resolve_plugin_plan(requested: str, api: TRTApi, model: onnx.ModelProto) -> PluginPlan:
    """Decide, once per build, how each custom op of ``model`` reaches ``api``; raise before any parsing when it
    cannot work. Registers the Python plugins when the plan takes them."""
    if requested not in PLUGIN_MODES:
        raise InvalidInputError(failure(f"plugins={requested!r} is not a plugin mode", f"one of {PLUGIN_MODES}",
                                        "pass plugins='auto'"))
    refs = plugin_refs(model)
    if requested == "python" and not api.supports_python_plugins:
        raise BuildError(failure(
            f"plugins='python' cannot be used with backend={api.name!r}",
            f"C++ plugins on {api.name}: its ONNX parser imports IPluginV3 plugins registered with an "
            "IPluginCreatorV3One creator only, and tensorrt.plugin registers another kind",
            "pass plugins='cpp' (build libtorchtrt_ext_plugins.so: pip install -e .), 'auto' or 'decompose'"))
    if not refs:
        return PluginPlan("none")
    ours = tuple(r for r in refs if r.provider == PROVIDER_OURS)
    our_route, library = _our_route(requested, api, ours) if ours else ("", None)
    theirs = tuple(r for r in refs if r.provider != PROVIDER_OURS)
    their_ops, fallback_library = _tensorrt_ops(requested, api, theirs) if theirs else ((), None)
    library = library or fallback_library
    plan_of = {**{r: OpPlan(r, our_route) for r in ours}, **dict(zip(theirs, their_ops))}
    ops = tuple(plan_of[r] for r in refs)
    routes = {op.route for op in their_ops}
    mode = our_route or next((r for r in ("tensorrt", "cpp") if r in routes), "decompose")
    return PluginPlan(mode, library, file_sha256(library) if library else None, ops)


def resolve_plugin_mode(requested: str, api: TRTApi, model: onnx.ModelProto) -> PluginPlan:
    """The former name of :func:`resolve_plugin_plan` (the same function)."""
    return resolve_plugin_plan(requested, api, model)


def plan_from_metadata(metadata: EngineMetadata) -> PluginPlan:
    """The plugin plan an engine was built with, as this machine can serve it: the one reader of the metadata's
    per-op record, used by the runtime and ``torchtrt-ext inspect``.

    An engine whose C++ plugins are not embedded points at this machine's plugin library (a warning when it differs
    from the one the engine was built with). Raises LibraryNotFoundError when that library is not built here.
    """
    ops = recorded_ops(metadata)
    library = None
    digest = metadata.plugin_library_sha256
    if any(op.route == "cpp" for op in ops) and not metadata.plugins_embedded:
        library = _native.plugin_library_path()
        digest = file_sha256(library)
        if metadata.plugin_library_sha256 and digest != metadata.plugin_library_sha256:
            log.warning("plugin library %s differs from the one the engine was built with (sha256 %s..., built "
                        "with %s...); if loading fails, rebuild the engine", library, digest[:12],
                        metadata.plugin_library_sha256[:12])
    return PluginPlan(metadata.plugin_mode, library, digest, ops)


def recorded_ops(metadata: EngineMetadata) -> tuple[OpPlan, ...]:
    """The per-op plan an engine's metadata records (for an engine written before that record: its plugin ids with
    the one recorded mode)."""
    if metadata.plugin_ops or metadata.plugin_mode not in ("cpp", "python"):
        return tuple(metadata.plugin_ops)
    return tuple(OpPlan(PluginRef(*_split_id(i)), metadata.plugin_mode) for i in metadata.plugins)


def _split_id(plugin_id: str) -> tuple[str, str, str]:
    """"<namespace>::<name>:<version>" -> (name, version, namespace)."""
    namespace, rest = plugin_id.split("::", 1)
    name, version = rest.rsplit(":", 1)
    return name, version, namespace


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


@functools.lru_cache(maxsize=16)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 of the file at ``path`` (cached by path, size and modification time)."""
    stat = path.stat()
    return _sha256_cached(str(path), stat.st_size, stat.st_mtime_ns)
