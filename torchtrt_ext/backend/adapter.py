"""The one place that knows how ``tensorrt`` and ``tensorrt_rtx`` differ.

Both Python packages expose nearly the same API (``Builder``, ``OnnxParser``, ``Runtime``, ...). What differs, and is
handled here only:

- the import name, the pip extra that installs it, and what a type-stub-only install looks like;
- typing: TensorRT 11 and TensorRT-RTX build strongly typed networks only; TensorRT 10.x is weakly typed unless the
  network is created ``STRONGLY_TYPED``, which ``network_flags`` asks for (the graph is already typed by
  ``apply_precision``; pinning layers with ``layer.precision`` is deprecated since 10.12 and misses the extra layers the
  parser names ``<node>_<n>``). Detected by feature (``BuilderFlag.FP16`` exists), never by version string;
- CUDA stream capture: TensorRT-RTX needs engines built with ``REQUIRE_USER_ALLOCATION``, which it refuses for
  networks with data-dependent shapes (``capture_flags``);
- plugins: TensorRT-RTX's ONNX parser imports C++ IPluginV3 plugins only (creators must be ``IPluginCreatorV3One``;
  the ``tensorrt.plugin`` Python creators are refused, ``supports_python_plugins``), and on its first plugin node it
  dlopens ``libtensorrt_rtx.so``, a name the pip wheel lacks: ``load_plugin_library`` makes that name resolve first
  (``backend.rtx_alias``);
- serializing a plugin library into the plan (``plugins_to_serialize``; TensorRT 10 also needs a version-compatible
  engine, TensorRT-RTX refuses one) and letting a runtime deserialize host code (``engine_host_code_allowed``),
  present on both as attributes, absent on older releases.

Everything else in ``torchtrt_ext`` calls TensorRT through a ``TRTApi`` object returned by ``load_backend``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.util
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from torchtrt_ext._progress import Counter
from torchtrt_ext.backend.rtx_alias import ensure_rtx_linker_name
from torchtrt_ext.errors import InvalidInputError, LibraryNotFoundError, MissingDependencyError, failure

if TYPE_CHECKING:  # the tensorrt-stubs package describes both APIs well enough for mypy
    import tensorrt as trt_t

log = logging.getLogger("torchtrt_ext.backend")

BACKENDS = ("tensorrt", "tensorrt_rtx")
_MODULES = {"tensorrt": "tensorrt", "tensorrt_rtx": "tensorrt_rtx"}
_EXTRAS = {"tensorrt": "trt", "tensorrt_rtx": "rtx"}
_PACKAGES = {"tensorrt": "tensorrt>=10.6", "tensorrt_rtx": "tensorrt-rtx-cu13>=1.7"}
_TRACE = 5  # TensorRT VERBOSE messages go to this Python level (below DEBUG)
_LOADED_LIBRARIES: set[tuple[str, str]] = set()  # (backend, real path) of the plugin libraries in a registry


def install_hint(backend: str) -> str:
    """The pip command that installs ``backend``."""
    return f"pip install 'torchtrt_ext[{_EXTRAS[backend]}]' (or: pip install '{_PACKAGES[backend]}')"


def _other_backend_hint(backend: str) -> str:
    """How to switch to the other backend where it is installed (found without importing it), else how to get it."""
    other = next(b for b in BACKENDS if b != backend)
    if importlib.util.find_spec(_MODULES[other]) is not None:
        return f"; or, {other} is installed: pass backend={other!r} (torchtrt-ext: --backend {other})"
    return f"; or backend={other!r}: {install_hint(other)}"


def check_backend_name(backend: str) -> str:
    if backend not in BACKENDS:
        raise InvalidInputError(failure(f"backend={backend!r} is not a known backend", f"one of {BACKENDS}",
                                        "pass backend='tensorrt' (datacenter GPUs) or 'tensorrt_rtx' (RTX GPUs)"))
    return backend


@dataclasses.dataclass(frozen=True)
class TRTApi:
    """A loaded TensorRT flavour: the module plus the answers to every question whose answer differs."""

    name: str
    trt: Any  # the imported module (tensorrt or tensorrt_rtx)

    @property
    def version(self) -> str:
        return str(self.trt.__version__)

    @property
    def is_rtx(self) -> bool:
        return self.name == "tensorrt_rtx"

    @property
    def supports_python_plugins(self) -> bool:
        """False on TensorRT-RTX: its ONNX parser refuses plugins whose creator is not an IPluginCreatorV3One, which
        is what ``tensorrt.plugin`` registers."""
        return not self.is_rtx

    @property
    def has_weak_typing(self) -> bool:
        """True where networks are weakly typed unless asked otherwise (TensorRT 10.x: the FP16 flag exists)."""
        return hasattr(self.trt.BuilderFlag, "FP16")

    def network_flags(self) -> int:
        """``create_network`` flags for a strongly typed network: ``STRONGLY_TYPED`` where networks are weakly typed by
        default (TensorRT 10.x); 0 where strong typing is the only mode (TensorRT 11 deprecates the flag, RTX)."""
        if not self.has_weak_typing:
            return 0
        return 1 << int(self.trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)

    def capture_flags(self, network: trt_t.INetworkDefinition) -> list[Any]:
        """Builder flags the engine of ``network`` needs for CUDA stream capture (``TRTModule(cuda_graphs=True)``):
        TensorRT-RTX's ``REQUIRE_USER_ALLOCATION`` (RTX >= 1.2, with ``is_stream_capturable`` at run time), only
        where the network can be captured at all: with data-dependent shapes (NonZero, NMS, while loops) RTX fails
        the build under that flag, and such an engine cannot be captured anyway. [] elsewhere."""
        flag = getattr(self.trt.BuilderFlag, "REQUIRE_USER_ALLOCATION", None)
        if not self.is_rtx or flag is None or _has_data_dependent_shapes(self.trt, network):
            return []
        return [flag]

    def can_embed_plugins(self) -> bool:
        """True where a plugin library can be serialized into the plan (``plugins_to_serialize`` exists)."""
        return hasattr(self.trt.IBuilderConfig, "plugins_to_serialize")

    @property
    def embedding_is_version_compatible(self) -> bool:
        """True where serializing a plugin library into the plan makes a version-compatible engine (TensorRT; not
        TensorRT-RTX), which cannot use TensorRT's own plugin library (libnvinfer_plugin)."""
        return not self.is_rtx and hasattr(self.trt.BuilderFlag, "VERSION_COMPATIBLE")

    def set_plugins_to_serialize(self, config: trt_t.IBuilderConfig, paths: list[str]) -> None:
        """Serialize the plugin libraries into the plan. TensorRT 10 wants a version-compatible engine for that;
        TensorRT-RTX embeds without it and fails with it ("Unable to load library: libnvinfer_lean.so.1")."""
        if self.embedding_is_version_compatible:
            config.set_flag(self.trt.BuilderFlag.VERSION_COMPATIBLE)
        config.plugins_to_serialize = paths

    def allow_host_code(self, runtime: trt_t.Runtime) -> None:
        """Let ``runtime`` deserialize an engine that carries a plugin library (host code)."""
        if hasattr(runtime, "engine_host_code_allowed"):
            runtime.engine_host_code_allowed = True

    def load_plugin_library(self, path: str) -> None:
        """Load a plugin library into the registry (on TensorRT-RTX after ``rtx_alias``); LibraryNotFoundError when
        TensorRT cannot load it. Loading the same file again is a no-op: the registry refuses a second load."""
        key = (self.name, os.path.realpath(path))
        if key in _LOADED_LIBRARIES:
            return
        if self.is_rtx:
            ensure_rtx_linker_name()  # else RTX's parser ends the process on the first plugin node
        registry = self.trt.get_plugin_registry()
        if registry.load_library(path) is None:  # the binding returns None on failure (a second load too)
            raise LibraryNotFoundError(failure(
                f"{self.name} {self.version} could not load the plugin library {path}",
                "a plugin library built for this TensorRT whose dependencies (e.g. libcudart.so.13) the loader finds",
                f"read TensorRT's error in the log 'torchtrt_ext.backend'; check `ldd {path}`; rebuild it here "
                "(pip install -e .)"))
        _LOADED_LIBRARIES.add(key)

    def tensorrt_plugin_creator(self, name: str, version: str, namespace: str) -> Any:
        """The creator TensorRT's own plugin library (libnvinfer_plugin: EfficientNMS_TRT, ...) registers as
        (name, version, namespace), or None: where plugins are refused, where that library is missing, or where it
        has no such plugin (TensorRT-RTX registers a few creators, not NVIDIA's plugin set)."""
        if not hasattr(self.trt, "init_libnvinfer_plugins"):
            return None
        if not _tensorrt_plugins_registered(self):
            return None
        return self.trt.get_plugin_registry().get_creator(name, version, namespace)

    def logger(self) -> trt_t.ILogger:
        """The one ILogger every Builder, Runtime and plugin library of this backend gets, alive for the process; it
        forwards TensorRT's messages to Python logging ("torchtrt_ext.backend") and to every open ``messages()``.

        One, because TensorRT logs through the logger of the first builder or runtime still alive and ignores a later
        one (a build's own logger would miss its messages while a TRTModule lives), and because
        ``init_libnvinfer_plugins`` keeps the pointer without a reference (its binding has no keep_alive).
        """
        logger: trt_t.ILogger = _process_logger(self.trt)
        return logger

    def messages(self) -> contextlib.AbstractContextManager[list[tuple[str, str]]]:
        """A context collecting the (severity, message) of the errors and warnings TensorRT logs meanwhile, so a failed
        build can quote them. Builds collecting at the same time each see the messages of all of them."""
        return _collect(_process_logger(self.trt))

    def make_progress_monitor(self, stream: Any = None) -> trt_t.IProgressMonitor:
        """An IProgressMonitor printing one stderr line when each top-level build phase starts and finishes."""
        monitor: trt_t.IProgressMonitor = _make_progress_monitor(self.trt, stream if stream is not None else sys.stderr)
        return monitor

    def dims(self, shape: tuple[int, ...]) -> trt_t.Dims:
        """A TensorRT Dims from a shape tuple."""
        dims: trt_t.Dims = self.trt.Dims(list(shape))
        return dims


def _has_data_dependent_shapes(trt: Any, network: Any) -> bool:
    """Whether a layer of ``network`` makes shapes that only the data decides (TensorRT's NonZero, NMS, trip limit)."""
    kinds = {getattr(trt.LayerType, name) for name in ("NON_ZERO", "NMS", "TRIP_LIMIT") if hasattr(trt.LayerType, name)}
    return any(network.get_layer(i).type in kinds for i in range(network.num_layers))


@functools.lru_cache(maxsize=None)
def _tensorrt_plugins_registered(api: TRTApi) -> bool:
    """Register TensorRT's own plugin creators (namespace "") once per process; False when TensorRT refuses."""
    registered = bool(api.trt.init_libnvinfer_plugins(api.logger(), ""))
    if not registered:
        log.warning("%s %s: init_libnvinfer_plugins failed; its plugins are not available", api.name, api.version)
    return registered


@functools.lru_cache(maxsize=None)  # the cache keeps each logger alive for the process
def _process_logger(trt: Any) -> Any:
    sev = trt.ILogger.Severity
    levels = {sev.INTERNAL_ERROR: logging.CRITICAL, sev.ERROR: logging.ERROR, sev.WARNING: logging.WARNING,
              sev.INFO: logging.DEBUG, sev.VERBOSE: _TRACE}
    base: Any = trt.ILogger

    class _Logger(base):  # type: ignore[misc]
        def __init__(self) -> None:
            base.__init__(self)
            self.lock = threading.Lock()
            self.collecting: dict[int, list[tuple[str, str]]] = {}  # id -> the list of an open messages()

        def log(self, severity: Any, msg: str) -> None:
            level = levels.get(severity, logging.INFO)
            if level >= logging.WARNING:
                with self.lock:
                    for records in self.collecting.values():
                        records.append((logging.getLevelName(level), msg))
            if log.isEnabledFor(level):
                log.log(level, "TensorRT: %s", msg)

    return _Logger()


@contextlib.contextmanager
def _collect(logger: Any) -> Iterator[list[tuple[str, str]]]:
    records: list[tuple[str, str]] = []
    with logger.lock:
        logger.collecting[id(records)] = records
    try:
        yield records
    finally:
        with logger.lock:
            del logger.collecting[id(records)]


def _make_progress_monitor(trt: Any, stream: Any) -> Any:
    base: Any = trt.IProgressMonitor
    started: dict[str, float] = {}
    counters: dict[str, Counter] = {}
    lock = threading.Lock()

    class _Progress(base):  # type: ignore[misc]
        def __init__(self) -> None:
            base.__init__(self)

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            with lock:
                started[phase_name] = time.monotonic()
                counters[phase_name] = Counter(phase_name, num_steps, stream=stream)
            if parent_phase is None:
                print(f"[torchtrt_ext] {phase_name} ...", file=stream, flush=True)
            else:
                log.debug("build phase %s (in %s, %d steps)", phase_name, parent_phase, num_steps)

        def phase_finish(self, phase_name: str) -> None:
            with lock:
                t0 = started.pop(phase_name, None)
                counters.pop(phase_name, None)
            seconds = time.monotonic() - t0 if t0 is not None else 0.0
            log.debug("build phase %s finished in %.2f s", phase_name, seconds)
            if not started:  # a top-level phase ended
                print(f"[torchtrt_ext] {phase_name} done ({seconds:.1f} s)", file=stream, flush=True)

        def step_complete(self, phase_name: str, step: int) -> bool:
            with lock:
                counter = counters.get(phase_name)
            if counter is not None:
                counter.step()  # a line every few seconds in a long phase (kernel tactics), nothing in a quick one
            return True  # never cancel

    return _Progress()


def _import(backend: str) -> Any:
    module_name = _MODULES[backend]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MissingDependencyError(failure(
            f"backend={backend!r} needs the {module_name} Python package, which is not installed ({exc})",
            f"an importable {module_name}", f"{install_hint(backend)}{_other_backend_hint(backend)}")) from None
    except Exception as exc:  # noqa: BLE001 - bindings without their libraries fail with OSError and others
        raise MissingDependencyError(failure(
            f"{module_name} is installed but does not import: {type(exc).__name__}: {exc}",
            f"{module_name} with its native libraries", f"reinstall it: {install_hint(backend)}")) from None
    if not hasattr(module, "Builder"):  # e.g. only the tensorrt-stubs package, which installs tensorrt/*.pyi
        raise MissingDependencyError(failure(
            f"{module_name} imports but has no Builder ({getattr(module, '__path__', '')}): only type stubs or a "
            "placeholder are installed", f"the real {module_name} package", install_hint(backend)))
    return module


@functools.lru_cache(maxsize=None)
def load_backend(backend: str) -> TRTApi:
    """Import ``backend`` ("tensorrt" or "tensorrt_rtx") lazily; MissingDependencyError names the pip extra."""
    check_backend_name(backend)
    return TRTApi(backend, _import(backend))


def backend_available(backend: str) -> bool:
    """True when ``load_backend(backend)`` would succeed."""
    try:
        load_backend(backend)
    except MissingDependencyError:
        return False
    return True
