"""``TRTModule``: runs a TensorRT engine on torch CUDA tensors as a drop-in ``nn.Module``.

- ``execute_async_v3`` on a stream of the module's own (one per thread), ordered after the caller's current torch stream
  and before it (TensorRT warns that the legacy default stream costs extra device synchronizations); outputs are torch
  tensors allocated on the input's device and returned in the structure the original model returned (a tensor, a
  tuple/list, a dict; stored in the engine metadata as ``output_tree``).
- Every TensorRT binding call is checked (``set_input_shape``, ``set_tensor_address``, the profile switch); inputs whose
  address TensorRT cannot take (not 256-byte aligned, e.g. the slice ``x[1:]``; empty, whose pointer is 0) are bound
  through an aligned copy or a non-null placeholder.
- Inputs are checked (device, dtype, rank, profile range) with errors naming the input, its shape and the allowed
  ranges; the optimization profile is chosen from the input shapes.
- One execution context per thread (contexts are not thread-safe; the deserialized engine is shared).
- ``cuda_graphs=True``: for each distinct set of input shapes, the first call captures a CUDA graph and later calls
  replay it (inputs copied into static buffers, outputs cloned out). Each graph has an execution context of its own
  that nothing else touches after the capture: a replay does not run ``enqueueV3``, so it must not depend on shapes,
  addresses or a profile another call set since. A context TensorRT says it cannot capture
  (``is_stream_capturable``, TensorRT-RTX) runs without a graph, logged once.
- Engines with a shape-tensor input (TensorRT reads it from host memory) or an input/output type torch has no
  element-for-element counterpart of (INT4, FP4) are refused when loaded, naming the tensor.
- ``save(path)`` / ``torchtrt_ext.load(path)``; the engine also travels in ``state_dict()`` (extra state).
- An engine built with ``embed_plugins=True`` carries our plugin library inside the plan, and deserializing it loads
  and runs that library's code. Such an engine loads only with ``allow_engine_host_code=True`` (CLI:
  ``--allow-engine-host-code``), the caller's statement that they trust where the file came from; without it the
  load is refused before anything is deserialized (``HostCodeNotAllowedError``). ``compile(embed_plugins=True)``
  passes it for the engine it built or found in the user's own cache (docs/deployment.md, "Security").
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from torchtrt_ext.backend.adapter import TRTApi, load_backend
from torchtrt_ext.backend.engine import Engine, EngineMetadata, TensorInfo
from torchtrt_ext.backend.plugins import load_plugins, plan_from_metadata
from torchtrt_ext.backend.user_libraries import UserLibrary, libraries_for_engine, load_user_library
from torchtrt_ext.backend.profiles import Profile, choose_profile
from torchtrt_ext.errors import (
    EngineCompatibilityError,
    HostCodeNotAllowedError,
    InvalidInputError,
    LibraryNotFoundError,
    NoGPUError,
    failure,
)

if TYPE_CHECKING:
    import tensorrt as trt_t

log = logging.getLogger("torchtrt_ext.runtime")
MAX_CUDA_GRAPHS_PER_THREAD = 8  # each graph holds an execution context (and its activation memory) of its own
ALIGNMENT = 256  # bytes: TensorRT requires every tensor address to be aligned so (IExecutionContext::setTensorAddress)
# Engine tensor types (metadata names) torch holds element for element. TensorRT's INT4 and FP4 pack two values in a
# byte, so a torch tensor of the engine's shape would be twice as large; torch.int4 is a placeholder type anyway.
_TORCH_TYPES = ("float32", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "bool", "float8_e4m3fn",
                "float8_e8m0fnu")


# ---------------------------------------------------------------------------------------------- output structure
def build_outputs(tree: Mapping[str, Any] | None, leaves: Sequence[torch.Tensor]) -> Any:
    """Rebuild the model's output structure from the flat engine outputs."""
    if tree is None:
        return leaves[0] if len(leaves) == 1 else tuple(leaves)

    def walk(node: Mapping[str, Any]) -> Any:
        kind = node["type"]
        if kind == "tensor":
            return leaves[node["index"]]
        items = [walk(item) for item in node["items"]]
        if kind == "dict":
            return dict(zip(node["keys"], items))
        return items if kind == "list" else tuple(items)
    return walk(tree)


# ---------------------------------------------------------------------------------------------- compatibility
def require_gpu(what: str = "running a TensorRT engine") -> torch.device:
    """torch's current CUDA device; NoGPUError saying that ``what`` needs one when torch sees no GPU."""
    if not torch.cuda.is_available():
        raise NoGPUError(failure(
            f"{what} needs a CUDA GPU, and torch sees none (torch.cuda.is_available() is False, torch "
            f"{torch.__version__})", "a machine with an NVIDIA GPU, its driver, and a CUDA build of torch",
            "run on the GPU machine; on a CPU-only machine you can still export (export_onnx) and, with "
            "backend='tensorrt_rtx', build engines (build_engine)"))
    return torch.device("cuda", torch.cuda.current_device())


def check_compatible(metadata: EngineMetadata, api: TRTApi, device: torch.device | None) -> None:
    """Raise EngineCompatibilityError, plainly, when the engine was built for another TensorRT or GPU.

    A version-compatible engine (``_version_compatible``) runs on the same or a newer TensorRT of the same major
    version; a TensorRT-RTX engine is portable across GPU architectures (RTX builds for several by default, and its
    runtime judges the plan when deserializing), so only TensorRT engines are held to the GPU they were built on.
    """
    if api.version != metadata.trt_version and not _runs_on_newer(metadata, api.version):
        compatible = " or, being version-compatible, a newer one of the same major version"
        raise EngineCompatibilityError(failure(
            f"the engine was built with {metadata.backend} {metadata.trt_version}, this machine has {api.name} "
            f"{api.version}", "the TensorRT version the engine was built with"
            + (compatible if _version_compatible(metadata) else ""),
            "rebuild the engine on the target machine (torchtrt_ext.compile or build_engine there)"))
    if device is None or metadata.compute_capability is None or metadata.backend == "tensorrt_rtx":
        return  # no GPU to compare with, or a portable TensorRT-RTX engine
    major, minor = torch.cuda.get_device_capability(device)
    here, name = f"{major}.{minor}", torch.cuda.get_device_name(device)
    if here != metadata.compute_capability:
        raise EngineCompatibilityError(failure(
            f"the engine was built for {metadata.gpu_name} (compute capability {metadata.compute_capability}), "
            f"this GPU is {name} (compute capability {here})", "an engine built on this GPU architecture",
            "rebuild the engine on this machine"))


def _version_compatible(metadata: EngineMetadata) -> bool:
    """Whether the build set VERSION_COMPATIBLE: TensorRT engines with the plugin library embedded (see
    ``TRTApi.set_plugins_to_serialize``)."""
    return metadata.backend == "tensorrt" and metadata.plugins_embedded


def _runs_on_newer(metadata: EngineMetadata, version: str) -> bool:
    """A version-compatible engine on ``version``: same major version, not older than the builder's."""
    def numbers(text: str) -> tuple[int, ...]:
        return tuple(int(part) for part in text.split(".") if part.isdigit())

    built, here = numbers(metadata.trt_version), numbers(version)
    return _version_compatible(metadata) and built[:1] == here[:1] and here >= built


def torch_dtype(info: TensorInfo, role: str) -> torch.dtype:
    """The torch dtype of an engine input or output; EngineCompatibilityError naming it when torch has none."""
    dtype = getattr(torch, info.dtype, None) if info.dtype in _TORCH_TYPES else None
    if not isinstance(dtype, torch.dtype):
        raise EngineCompatibilityError(failure(
            f"engine {role} {info.name!r} has type {info.dtype}, which torch {torch.__version__} cannot hold element "
            "for element", f"one of {', '.join(t for t in _TORCH_TYPES if hasattr(torch, t))}",
            f"cast {info.name!r} to such a type in the model before export (e.g. dequantize the output)"))
    return dtype


def check_bindings(metadata: EngineMetadata, cuda_engine: Any, api: TRTApi) -> None:
    """Refuse an engine TRTModule cannot bind: a tensor type torch lacks, or a shape-tensor input (TensorRT reads it
    from host memory, and TRTModule binds device memory)."""
    for role, infos in (("input", metadata.inputs), ("output", metadata.outputs)):
        for info in infos:
            torch_dtype(info, role)
    host = api.trt.TensorLocation.HOST
    for info in metadata.inputs:
        if cuda_engine.get_tensor_location(info.name) == host:
            raise EngineCompatibilityError(failure(
                f"engine input {info.name!r} is a shape tensor: {api.name} reads its values on the host",
                "inputs TensorRT reads from device memory (TRTModule binds CUDA tensors)",
                f"make {info.name!r} a constant in the model, or derive the shape from a tensor input (e.g. "
                "Shape of a data input) before export"))


def check_inputs(inputs: Sequence[TensorInfo], profiles: Sequence[Profile],
                 tensors: Sequence[Any]) -> tuple[torch.device, int]:
    """Check ``tensors`` against the engine's recorded ``inputs`` (type, one CUDA device, dtype, rank) and
    ``profiles`` (the shapes fit one); return their device and the index of the first profile that holds them.
    Needs no engine and no GPU work: InvalidInputError naming the input and what was expected."""
    device: torch.device | None = None
    for info, value in zip(inputs, tensors):
        if not isinstance(value, torch.Tensor):
            raise InvalidInputError(failure(f"input {info.name!r} is a {type(value).__name__}",
                                            "a torch.Tensor", "pass tensors"))
        if value.device.type != "cuda":
            raise InvalidInputError(failure(
                f"input {info.name!r} (shape {tuple(value.shape)}) is on {value.device}",
                "a CUDA tensor: the TensorRT engine runs on the GPU",
                f"move it first: {info.name}.cuda() (CPU example inputs are fine for compile's export, not for "
                "running the engine)"))
        device = device or value.device
        if value.device != device:
            raise InvalidInputError(failure(f"input {info.name!r} is on {value.device}, another input on {device}",
                                            "all inputs on one GPU", "move them to one device"))
        expected = torch_dtype(info, "input")
        if value.dtype != expected:
            raise InvalidInputError(failure(f"input {info.name!r} has dtype {value.dtype}",
                                            f"{expected} (the engine's input type)", f"convert: .to({expected})"))
        if value.dim() != len(info.shape):
            raise InvalidInputError(failure(f"input {info.name!r} has shape {tuple(value.shape)} (rank "
                                            f"{value.dim()})", f"rank {len(info.shape)}, shape like "
                                            f"{list(info.shape)} (-1: dynamic)", "reshape the input"))
    shapes = {info.name: tuple(t.shape) for info, t in zip(inputs, tensors)}
    index = choose_profile(profiles, shapes)
    if index is None:
        ranges = "; ".join(f"profile {i}: " + ", ".join(f"{n} {r.describe()}" for n, r in p.items())
                           for i, p in enumerate(profiles))
        given = ", ".join(f"{n} {s}" for n, s in shapes.items())
        raise InvalidInputError(failure(
            f"input shapes {given} fit no optimization profile of the engine", f"shapes inside one of: {ranges}",
            "rebuild with profiles= covering these shapes (compile(..., profiles=...))"))
    assert device is not None
    return device, index


# ---------------------------------------------------------------------------------------------- loaded state
@dataclasses.dataclass
class _Loaded:
    api: TRTApi
    runtime: Any
    cuda_engine: Any
    device: torch.device
    local: threading.local


def check_host_code_allowed(metadata: EngineMetadata, allow_engine_host_code: bool, source: str) -> None:
    """Refuse an engine that carries host code (an embedded plugin library) unless the caller allowed it."""
    if metadata.plugins_embedded and not allow_engine_host_code:
        raise HostCodeNotAllowedError(failure(
            f"{source} carries host code: the plugin library for {list(metadata.plugins)} is embedded in the plan "
            "(built with embed_plugins=True), and deserializing it loads and runs that library's code, as "
            "dangerous as loading a shared library from the same place",
            "engines with host code only where the caller allows it explicitly (TensorRT's engine_host_code_allowed "
            "is off by default for the same reason)",
            "if you trust where this file came from, pass allow_engine_host_code=True (CLI: "
            "--allow-engine-host-code); otherwise have it rebuilt with embed_plugins=False and load "
            "libtorchtrt_ext_plugins.so from a build you trust"))


def check_plugin_libraries(metadata: EngineMetadata,
                           plugin_libraries: Sequence[str | os.PathLike[str]] | None) -> tuple[UserLibrary, ...]:
    """The user's plugin libraries to load for an engine with ``metadata``: of those the caller names, the ones the
    engine's custom nodes need, each checked against the recorded SHA-256 (none when they are embedded).
    EngineCompatibilityError names the recorded file and hash of a library not given, or given with other bytes."""
    serving = {op.library for op in metadata.plugin_plan.user_ops}
    needed = [lib for lib in metadata.options.plugin_libraries if lib.name in serving]
    return libraries_for_engine([] if metadata.plugins_embedded else needed, plugin_libraries)


def create_runtime(api: TRTApi, metadata: EngineMetadata, *, allow_engine_host_code: bool, source: str) -> Any:
    """A TensorRT ``Runtime`` for an engine with ``metadata``; host code is allowed only for an engine that carries it
    and only when ``allow_engine_host_code`` is True (else HostCodeNotAllowedError, before the Runtime exists)."""
    check_host_code_allowed(metadata, allow_engine_host_code, source)
    runtime = api.trt.Runtime(api.logger())
    if metadata.plugins_embedded:
        api.allow_host_code(runtime)
    return runtime


def _deserialize(engine: Engine, device: torch.device, allow_engine_host_code: bool,
                 user_libraries: Sequence[UserLibrary] = ()) -> _Loaded:
    metadata = engine.metadata
    api = load_backend(metadata.backend)
    check_compatible(metadata, api, device)
    for library in user_libraries:
        load_user_library(api, library)
    try:
        load_plugins(api, plan_from_metadata(metadata))
    except LibraryNotFoundError as exc:
        raise EngineCompatibilityError(failure(
            f"the engine needs plugins {list(metadata.plugins)}, which cannot be loaded here ({exc})",
            "libtorchtrt_ext_plugins.so built for this TensorRT (and, for ops bound to TensorRT's own plugins, a "
            "TensorRT that registers them)",
            "build it (pip install -e .), or rebuild the engine with embed_plugins=True or plugins='decompose'"))
    with torch.cuda.device(device):
        runtime: trt_t.Runtime = create_runtime(api, metadata, allow_engine_host_code=allow_engine_host_code,
                                                source=repr(engine))
        cuda_engine = runtime.deserialize_cuda_engine(engine.plan)
    if cuda_engine is None:
        raise EngineCompatibilityError(failure(
            f"{api.name} {api.version} could not deserialize the engine ({engine!r})",
            "an engine built for this GPU and TensorRT, with its plugins loadable",
            "check the plugin library (serialized fields must match the creator), or rebuild on the target; "
            "TensorRT's message is in the log 'torchtrt_ext.backend'"))
    return _Loaded(api, runtime, cuda_engine, device, threading.local())


# ---------------------------------------------------------------------------------------------- the module
class TRTModule(torch.nn.Module):
    """An ``nn.Module`` running a TensorRT ``Engine`` on CUDA tensors. See the module docstring."""

    def __init__(self, engine: Engine | str | os.PathLike[str] | None = None, *, cuda_graphs: bool = False,
                 allow_engine_host_code: bool = False,
                 plugin_libraries: Sequence[str | os.PathLike[str]] | None = None) -> None:
        """``engine``: the Engine to run, or the path of an engine file (None: set it later through
        ``load_state_dict``). ``cuda_graphs``: replay CUDA graphs for repeated input shapes. Default False.
        ``allow_engine_host_code``: let an engine that carries an embedded plugin library load and run it; only for
        engines you trust. Default False (refused). ``plugin_libraries``: your own plugin libraries the engine was
        built with (checked against the SHA-256 it records; never a path read from the engine). Default None."""
        super().__init__()
        if isinstance(engine, (str, os.PathLike)):
            engine = Engine.load(engine)
        elif engine is not None and not isinstance(engine, Engine):
            raise InvalidInputError(failure(f"TRTModule got a {type(engine).__name__}",
                                            "an Engine (build_engine's result) or the path of an engine file",
                                            "pass build_engine(...)'s result, or torchtrt_ext.load(path)"))
        self.plugin_libraries = tuple(plugin_libraries or ())
        self._user_libraries: tuple[UserLibrary, ...] = ()
        if engine is not None:
            check_host_code_allowed(engine.metadata, allow_engine_host_code, repr(engine))
            self._user_libraries = check_plugin_libraries(engine.metadata, self.plugin_libraries)
        self._engine = engine
        self.cuda_graphs = cuda_graphs
        self.allow_engine_host_code = allow_engine_host_code
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    # -- description
    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise InvalidInputError(failure("this TRTModule has no engine", "an Engine passed to TRTModule(...) or "
                                            "restored with load_state_dict", "use torchtrt_ext.load(path)"))
        return self._engine

    @property
    def metadata(self) -> EngineMetadata:
        return self.engine.metadata

    @property
    def input_names(self) -> list[str]:
        return self.metadata.input_names

    @property
    def output_names(self) -> list[str]:
        return self.metadata.output_names

    def extra_repr(self) -> str:
        if self._engine is None:
            return "engine=None"
        m = self.metadata
        return (f"inputs={m.input_names}, outputs={m.output_names}, profiles={len(m.profiles)}, "
                f"precision={m.options.precision}, target={m.describe_target()}")

    # -- persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the engine file (plan + metadata); ``torchtrt_ext.load(path)`` reads it back."""
        return self.engine.save(path)

    def get_extra_state(self) -> Any:
        return {"engine": self._engine.to_bytes() if self._engine is not None else None}

    def set_extra_state(self, state: Any) -> None:
        data = state.get("engine") if isinstance(state, Mapping) else None
        engine = Engine.from_bytes(data, source="state_dict") if data else None
        if engine is not None:
            check_host_code_allowed(engine.metadata, self.allow_engine_host_code, "the engine in this state_dict")
            self._user_libraries = check_plugin_libraries(engine.metadata, self.plugin_libraries)
        self._engine = engine
        self._loaded = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_loaded"] = None  # TensorRT objects do not pickle; reloaded on first use
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- execution
    def load_engine(self, device: torch.device | None = None) -> None:
        """Deserialize the engine now (otherwise done on the first call) on ``device`` (default: current GPU)."""
        with self._lock:
            if self._loaded is None:
                target = device if device is not None else require_gpu()
                loaded = _deserialize(self.engine, target, self.allow_engine_host_code, self._user_libraries)
                check_bindings(self.metadata, loaded.cuda_engine, loaded.api)
                self._loaded = loaded

    def _bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[torch.Tensor]:
        names = self.input_names
        if len(args) > len(names):
            raise InvalidInputError(failure(f"{len(args)} positional inputs given", f"at most {len(names)}: {names}",
                                            "pass the inputs the model was compiled with"))
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise InvalidInputError(failure(f"unexpected input {key!r}", f"inputs {names}", "check the name"))
            if key in bound:
                raise InvalidInputError(failure(f"input {key!r} given twice", "each input once", "drop one"))
            bound[key] = value
        missing = [n for n in names if n not in bound]
        if missing:
            raise InvalidInputError(failure(f"missing input(s) {missing}", f"inputs {names}", "pass every input"))
        return [bound[n] for n in names]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        tensors = self._bind(args, kwargs)
        device, profile = check_inputs(self.metadata.inputs, self.metadata.profiles, tensors)
        if self._loaded is None:
            self.load_engine(device)
        loaded = self._loaded
        assert loaded is not None
        if device != loaded.device:
            raise InvalidInputError(failure(f"inputs are on {device}", f"{loaded.device}, where the engine was loaded",
                                            "move the inputs, or load another TRTModule on that device"))
        with torch.cuda.device(device):
            if self.cuda_graphs and not torch.cuda.is_current_stream_capturing():
                outputs = self._run_graph(loaded, tensors, profile)
            else:
                outputs = self._run(loaded, self._context(loaded), tensors, profile)
        return build_outputs(self.metadata.output_tree, outputs)

    def _context(self, loaded: _Loaded) -> _Context:
        """This thread's execution context (contexts are not thread-safe), created on first use."""
        context = getattr(loaded.local, "context", None)
        if context is None:
            context = loaded.local.context = _new_context(loaded)
            loaded.local.graphs = {}
        return context

    def _run(self, loaded: _Loaded, context: _Context, tensors: list[torch.Tensor], profile: int) -> list[torch.Tensor]:
        """Bind and enqueue on this thread's own stream, ordered after and before the caller's current stream.

        Everything torch allocates here (outputs, aligned copies) is allocated on the caller's stream before the engine
        stream waits for it, and the caller's stream waits for the engine before anything else runs on it, so memory
        freed afterwards is never reused while TensorRT still reads or writes it.
        """
        caller = torch.cuda.current_stream(loaded.device)
        stream = _engine_stream(loaded)
        outputs = self._prepare(loaded, context, tensors, profile, stream.cuda_stream)
        stream.wait_stream(caller)
        _enqueue(context, stream.cuda_stream, "execute_async_v3")
        caller.wait_stream(stream)
        return outputs

    def _prepare(self, loaded: _Loaded, context: _Context, tensors: list[torch.Tensor], profile: int,
                 stream: int) -> list[torch.Tensor]:
        """Select the profile, bind inputs, allocate and bind outputs; every TensorRT call checked. The bound input
        buffers (the inputs, or their aligned copies) stay referenced by ``context`` while it holds their addresses."""
        trt_context = context.context
        if context.profile != profile:
            if not trt_context.set_optimization_profile_async(profile, stream):
                raise EngineCompatibilityError(failure(
                    f"TensorRT refused to switch the execution context to optimization profile {profile}",
                    f"a profile index below the engine's {len(self.metadata.profiles)}",
                    "rebuild the engine; read the TensorRT error in the log 'torchtrt_ext.backend'"))
            context.profile = profile
        bound: list[torch.Tensor] = []
        for info, tensor in zip(self.metadata.inputs, tensors):
            shape = tuple(tensor.shape)
            if not trt_context.set_input_shape(info.name, shape):
                allowed = self.metadata.profiles[profile].get(info.name)
                raise InvalidInputError(failure(
                    f"TensorRT refused the shape {shape} of input {info.name!r} (profile {profile}: "
                    f"{allowed.describe() if allowed is not None else 'static'})",
                    "a shape inside the profile's range that the engine accepts",
                    "pass an input inside the profile range; read the TensorRT error in the log 'torchtrt_ext.backend'"))
            buffer = device_buffer(tensor)
            bound.append(buffer)
            _set_address(trt_context, info.name, buffer, "input")
        outputs = []
        for info in self.metadata.outputs:
            dims = trt_context.get_tensor_shape(info.name)
            shape = tuple(int(dims[i]) for i in range(len(dims)))
            if any(d < 0 for d in shape):
                raise EngineCompatibilityError(failure(
                    f"output {info.name!r} has a data-dependent shape {shape}", "outputs whose shapes follow from "
                    "the input shapes", "make the output shape static in the model (e.g. pad instead of nonzero)"))
            out = aligned_empty(shape, torch_dtype(info, "output"), loaded.device)
            _set_address(trt_context, info.name, out, "output")
            outputs.append(out)
        context.bound = bound
        return outputs

    def _run_graph(self, loaded: _Loaded, tensors: list[torch.Tensor], profile: int) -> list[torch.Tensor]:
        key = (profile,) + tuple((tuple(t.shape), t.dtype) for t in tensors)
        self._context(loaded)
        graphs: dict[Any, _Graph | None] = loaded.local.graphs
        if key not in graphs and len(graphs) < MAX_CUDA_GRAPHS_PER_THREAD:
            graphs[key], outputs = self._capture(loaded, tensors, profile)
            return outputs
        entry = graphs.get(key)
        if entry is None:  # too many shapes, or an engine TensorRT cannot capture: run without a graph
            return self._run(loaded, self._context(loaded), tensors, profile)
        for dst, src in zip(entry.inputs, tensors):
            dst.copy_(src)
        entry.graph.replay()
        return [o.clone() for o in entry.outputs]

    def _capture(self, loaded: _Loaded, tensors: list[torch.Tensor], profile: int
                 ) -> tuple[_Graph | None, list[torch.Tensor]]:
        """Capture one graph on a context of its own (its shapes, addresses and profile never change afterwards).
        Returns the graph (None where TensorRT cannot capture the engine) and this call's outputs."""
        context = _new_context(loaded)
        static_in = [t.clone(memory_format=torch.contiguous_format) for t in tensors]
        static_out = self._run(loaded, context, static_in, profile)  # warm-up outside capture (TensorRT needs it)
        stream = _engine_stream(loaded)
        capturable = getattr(context.context, "is_stream_capturable", None)
        if capturable is not None and not capturable(stream.cuda_stream):
            log.warning("cuda_graphs=True: %s cannot capture this engine in a CUDA graph (is_stream_capturable is "
                        "False, e.g. data-dependent shapes or on-device control flow); running it without one",
                        loaded.api.name if loaded.api is not None else "TensorRT")
            return None, static_out
        graph = torch.cuda.CUDAGraph()
        # thread_local: another thread's CUDA calls meanwhile (an allocation, a sync: a data loader, another
        # TRTModule) neither fail nor invalidate this capture, as torch's default "global" mode lets them
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            _enqueue(context, stream.cuda_stream, "capturing execute_async_v3 in a CUDA graph")
        return _Graph(graph, context, static_in, static_out), [o.clone() for o in static_out]


# ---------------------------------------------------------------------------------------------- execution helpers
@dataclasses.dataclass
class _Context:
    """A TensorRT execution context and the optimization profile selected on it."""

    context: Any
    profile: int = 0  # TensorRT selects profile 0 in a new context
    bound: list[torch.Tensor] = dataclasses.field(default_factory=list)  # the buffers whose addresses it holds


@dataclasses.dataclass
class _Graph:
    """A captured CUDA graph, the context it replays, and its static input and output buffers."""

    graph: Any
    context: _Context
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


def _new_context(loaded: _Loaded) -> _Context:
    context = loaded.cuda_engine.create_execution_context()
    if context is None:
        raise EngineCompatibilityError(failure(
            "TensorRT could not create an execution context", "enough free GPU memory for the engine",
            "free GPU memory, or rebuild with a smaller workspace / narrower profiles"))
    return _Context(context)


def _engine_stream(loaded: _Loaded) -> torch.cuda.Stream:
    """This thread's private stream on the engine's device (never the legacy default stream)."""
    stream = getattr(loaded.local, "stream", None)
    if stream is None:
        stream = loaded.local.stream = torch.cuda.Stream(loaded.device)  # type: ignore[no-untyped-call]
    return stream


def _enqueue(context: _Context, stream: int, what: str) -> None:
    if not context.context.execute_async_v3(stream):
        raise EngineCompatibilityError(failure(
            f"TensorRT's {what} failed", "a successful enqueue",
            "read the TensorRT error in the log 'torchtrt_ext.backend'; check plugins and input shapes"
            + ("; or use cuda_graphs=False" if "graph" in what else "")))


def tensor_address(tensor: torch.Tensor) -> int:
    """Where ``tensor``'s elements start in memory; unlike ``data_ptr()`` not 0 for an empty view of real storage."""
    return int(tensor.untyped_storage().data_ptr()) + int(tensor.storage_offset()) * tensor.element_size()


def aligned_empty(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An uninitialized contiguous tensor whose address TensorRT accepts: aligned to ``ALIGNMENT`` and, even when
    empty, not null (a view into a slightly larger allocation)."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    raw = torch.empty(nbytes + ALIGNMENT, dtype=torch.uint8, device=device)
    skip = -tensor_address(raw) % ALIGNMENT
    return raw[skip:skip + nbytes].view(dtype).view(tuple(shape))


def device_buffer(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` when TensorRT can read it in place (contiguous, address aligned and non-null), else an aligned copy:
    a contiguous slice such as ``x[1:]`` keeps its offset, and an empty tensor's address is 0."""
    address = tensor_address(tensor)
    if tensor.is_contiguous() and address != 0 and address % ALIGNMENT == 0:
        return tensor
    return aligned_empty(tuple(tensor.shape), tensor.dtype, tensor.device).copy_(tensor)


def _set_address(trt_context: Any, name: str, buffer: torch.Tensor, role: str) -> None:
    address = tensor_address(buffer)
    if not trt_context.set_tensor_address(name, address):
        raise EngineCompatibilityError(failure(
            f"TensorRT refused the address {address:#x} of {role} {name!r}",
            f"a non-null device address aligned to {ALIGNMENT} bytes, for a tensor the engine has",
            "read the TensorRT error in the log 'torchtrt_ext.backend'"))


def load(path: str | os.PathLike[str], *, cuda_graphs: bool = False, allow_engine_host_code: bool = False,
         plugin_libraries: Sequence[str | os.PathLike[str]] | None = None) -> TRTModule:
    """Load an engine file written by ``TRTModule.save`` / ``Engine.save``.

    Checks the TensorRT version (and, where a GPU is present, its architecture) before returning, and deserializes
    eagerly when a GPU is present so incompatibilities surface here rather than at the first call.
    ``allow_engine_host_code``: see ``TRTModule``; an engine with an embedded plugin library is refused without it,
    before anything is deserialized. Default False. ``plugin_libraries``: see ``TRTModule``. Default None.
    """
    engine = Engine.load(path)
    check_host_code_allowed(engine.metadata, allow_engine_host_code, f"engine file {path}")
    api = load_backend(engine.metadata.backend)
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else None
    check_compatible(engine.metadata, api, device)
    module = TRTModule(engine, cuda_graphs=cuda_graphs, allow_engine_host_code=allow_engine_host_code,
                       plugin_libraries=plugin_libraries)
    if device is not None:
        module.load_engine(device)
    return module
