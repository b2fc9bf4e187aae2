"""``TRTModule``: runs a TensorRT engine on torch CUDA tensors as a drop-in ``nn.Module``.

- ``execute_async_v3`` on torch's current CUDA stream; outputs are torch tensors allocated on the input's device and
  returned in the structure the original model returned (a tensor, a tuple/list, a dict; stored in the engine
  metadata as ``output_tree``).
- Inputs are checked (device, dtype, rank, profile range) with errors naming the input, its shape and the allowed
  ranges; the optimization profile is chosen from the input shapes.
- One execution context per thread (contexts are not thread-safe; the deserialized engine is shared).
- ``cuda_graphs=True``: for each distinct set of input shapes, the first call captures a CUDA graph and later calls
  replay it (inputs copied into static buffers, outputs cloned out).
- ``save(path)`` / ``torchtrt_ext.load(path)``; the engine also travels in ``state_dict()`` (extra state).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from torchtrt_ext.backend.adapter import TRTApi, load_backend
from torchtrt_ext.backend.engine import Engine, EngineMetadata
from torchtrt_ext.backend.plugins import PluginPlan, load_plugins
from torchtrt_ext.backend.profiles import choose_profile
from torchtrt_ext.errors import (
    EngineCompatibilityError,
    InvalidInputError,
    LibraryNotFoundError,
    NoGPUError,
    failure,
)

if TYPE_CHECKING:
    import tensorrt as trt_t

log = logging.getLogger("torchtrt_ext.runtime")
MAX_CUDA_GRAPHS_PER_THREAD = 8


# ---------------------------------------------------------------------------------------------- output structure
def output_tree(outputs: Any) -> dict[str, Any]:
    """Describe the structure of a model's outputs; leaves are numbered in export order (pytree order)."""
    counter = iter(range(1 << 30))

    def walk(obj: Any) -> dict[str, Any]:
        if isinstance(obj, torch.Tensor):
            return {"type": "tensor", "index": next(counter)}
        if isinstance(obj, Mapping):
            return {"type": "dict", "keys": [str(k) for k in obj], "items": [walk(v) for v in obj.values()]}
        if isinstance(obj, (tuple, list)):
            return {"type": "list" if isinstance(obj, list) else "tuple", "items": [walk(v) for v in obj]}
        raise InvalidInputError(failure(f"the model returned a {type(obj).__name__}",
                                        "tensors, or tuples/lists/dicts of tensors",
                                        "return only tensors from forward (keep other values out of the model)"))
    return walk(outputs)


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
    """Raise EngineCompatibilityError, plainly, when the engine was built for another TensorRT or GPU."""
    if api.version != metadata.trt_version:
        raise EngineCompatibilityError(failure(
            f"the engine was built with {metadata.backend} {metadata.trt_version}, this machine has {api.name} "
            f"{api.version}", "the TensorRT version the engine was built with",
            "rebuild the engine on the target machine (torchtrt_ext.compile or build_engine there)"))
    if device is None or metadata.compute_capability is None:
        return  # no GPU to compare with, or a portable TensorRT-RTX engine built without one
    major, minor = torch.cuda.get_device_capability(device)
    here, name = f"{major}.{minor}", torch.cuda.get_device_name(device)
    if here != metadata.compute_capability:
        raise EngineCompatibilityError(failure(
            f"the engine was built for {metadata.gpu_name} (compute capability {metadata.compute_capability}), "
            f"this GPU is {name} (compute capability {here})", "an engine built on this GPU architecture",
            "rebuild the engine on this machine"))


# ---------------------------------------------------------------------------------------------- loaded state
@dataclasses.dataclass
class _Loaded:
    api: TRTApi
    runtime: Any
    cuda_engine: Any
    device: torch.device
    local: threading.local


def _plugin_plan(metadata: EngineMetadata) -> PluginPlan:
    if metadata.plugin_mode == "cpp" and not metadata.plugins_embedded:
        from torchtrt_ext import _native
        from torchtrt_ext.backend.plugins import file_sha256
        path = _native.plugin_library_path()
        digest = file_sha256(path)
        if metadata.plugin_library_sha256 and digest != metadata.plugin_library_sha256:
            log.warning("plugin library %s differs from the one the engine was built with (sha256 %s..., built "
                        "with %s...); if loading fails, rebuild the engine", path, digest[:12],
                        metadata.plugin_library_sha256[:12])
        return PluginPlan("cpp", path, digest)
    if metadata.plugin_mode == "python":
        return PluginPlan("python")
    return PluginPlan("none")


def _deserialize(engine: Engine, device: torch.device) -> _Loaded:
    metadata = engine.metadata
    api = load_backend(metadata.backend)
    check_compatible(metadata, api, device)
    try:
        load_plugins(api, _plugin_plan(metadata))
    except LibraryNotFoundError as exc:
        raise EngineCompatibilityError(failure(
            f"the engine needs plugins {list(metadata.plugins)} from the C++ plugin library, which is not available "
            f"here ({exc})", "libtorchtrt_ext_plugins.so built for this TensorRT",
            "build it (pip install -e .), or rebuild the engine with embed_plugins=True or plugins='decompose'"))
    logger = api.make_logger()
    with torch.cuda.device(device):
        runtime: trt_t.Runtime = api.trt.Runtime(logger)
        if metadata.plugins_embedded:
            api.allow_host_code(runtime)
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

    def __init__(self, engine: Engine | str | os.PathLike[str] | None = None, *, cuda_graphs: bool = False) -> None:
        """``engine``: the Engine to run, or the path of an engine file (None: set it later through
        ``load_state_dict``). ``cuda_graphs``: replay CUDA graphs for repeated input shapes. Default False."""
        super().__init__()
        if isinstance(engine, (str, os.PathLike)):
            engine = Engine.load(engine)
        elif engine is not None and not isinstance(engine, Engine):
            raise InvalidInputError(failure(f"TRTModule got a {type(engine).__name__}",
                                            "an Engine (build_engine's result) or the path of an engine file",
                                            "pass build_engine(...)'s result, or torchtrt_ext.load(path)"))
        self._engine = engine
        self.cuda_graphs = cuda_graphs
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
                f"precision={m.build.get('precision')}, target={m.describe_target()}")

    # -- persistence
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the engine file (plan + metadata); ``torchtrt_ext.load(path)`` reads it back."""
        return self.engine.save(path)

    def get_extra_state(self) -> Any:
        return {"engine": self._engine.to_bytes() if self._engine is not None else None}

    def set_extra_state(self, state: Any) -> None:
        data = state.get("engine") if isinstance(state, Mapping) else None
        self._engine = Engine.from_bytes(data, source="state_dict") if data else None
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
                self._loaded = _deserialize(self.engine, target)

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

    def _check(self, tensors: list[Any]) -> tuple[torch.device, int]:
        meta = self.metadata
        device: torch.device | None = None
        for info, value in zip(meta.inputs, tensors):
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
            expected = getattr(torch, info.dtype, None)
            if value.dtype != expected:
                raise InvalidInputError(failure(f"input {info.name!r} has dtype {value.dtype}",
                                                f"{expected} (the engine's input type)", f"convert: .to({expected})"))
            if value.dim() != len(info.shape):
                raise InvalidInputError(failure(f"input {info.name!r} has shape {tuple(value.shape)} (rank "
                                                f"{value.dim()})", f"rank {len(info.shape)}, shape like "
                                                f"{list(info.shape)} (-1: dynamic)", "reshape the input"))
        shapes = {info.name: tuple(t.shape) for info, t in zip(meta.inputs, tensors)}
        index = choose_profile(meta.profiles, shapes)
        if index is None:
            ranges = "; ".join(f"profile {i}: " + ", ".join(f"{n} {r.describe()}" for n, r in p.items())
                               for i, p in enumerate(meta.profiles))
            given = ", ".join(f"{n} {s}" for n, s in shapes.items())
            raise InvalidInputError(failure(
                f"input shapes {given} fit no optimization profile of the engine", f"shapes inside one of: {ranges}",
                "rebuild with profiles= covering these shapes (compile(..., profiles=...))"))
        assert device is not None
        return device, index

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        tensors = self._bind(args, kwargs)
        device, profile = self._check(tensors)
        if self._loaded is None:
            self.load_engine(device)
        loaded = self._loaded
        assert loaded is not None
        if device != loaded.device:
            raise InvalidInputError(failure(f"inputs are on {device}", f"{loaded.device}, where the engine was loaded",
                                            "move the inputs, or load another TRTModule on that device"))
        tensors = [t.contiguous() for t in tensors]
        with torch.cuda.device(device):
            if self.cuda_graphs and not torch.cuda.is_current_stream_capturing():
                outputs = self._run_graph(loaded, tensors, profile)
            else:
                outputs = self._run(loaded, self._context(loaded), tensors, profile)
        return build_outputs(self.metadata.output_tree, outputs)

    def _context(self, loaded: _Loaded) -> Any:
        context = getattr(loaded.local, "context", None)
        if context is None:
            context = loaded.cuda_engine.create_execution_context()
            if context is None:
                raise EngineCompatibilityError(failure(
                    "TensorRT could not create an execution context", "enough free GPU memory for the engine",
                    "free GPU memory, or rebuild with a smaller workspace / narrower profiles"))
            loaded.local.context = context
            loaded.local.profile = 0
            loaded.local.graphs = {}
        return context

    def _prepare(self, loaded: _Loaded, context: trt_t.IExecutionContext, tensors: list[torch.Tensor],
                 profile: int, stream: int) -> list[torch.Tensor]:
        """Select the profile, bind inputs, allocate and bind outputs."""
        if getattr(loaded.local, "profile", 0) != profile:
            context.set_optimization_profile_async(profile, stream)
            loaded.local.profile = profile
        for info, tensor in zip(self.metadata.inputs, tensors):
            context.set_input_shape(info.name, tuple(tensor.shape))
            context.set_tensor_address(info.name, tensor.data_ptr())
        outputs = []
        for info in self.metadata.outputs:
            dims = context.get_tensor_shape(info.name)
            shape = tuple(int(dims[i]) for i in range(len(dims)))
            if any(d < 0 for d in shape):
                raise EngineCompatibilityError(failure(
                    f"output {info.name!r} has a data-dependent shape {shape}", "outputs whose shapes follow from "
                    "the input shapes", "make the output shape static in the model (e.g. pad instead of nonzero)"))
            out = torch.empty(shape, dtype=getattr(torch, info.dtype), device=loaded.device)
            context.set_tensor_address(info.name, out.data_ptr())
            outputs.append(out)
        return outputs

    def _run(self, loaded: _Loaded, context: trt_t.IExecutionContext, tensors: list[torch.Tensor],
             profile: int) -> list[torch.Tensor]:
        stream = torch.cuda.current_stream(loaded.device).cuda_stream
        outputs = self._prepare(loaded, context, tensors, profile, stream)
        if not context.execute_async_v3(stream):
            raise EngineCompatibilityError(failure(
                "TensorRT's execute_async_v3 failed", "a successful enqueue",
                "read the TensorRT error in the log 'torchtrt_ext.backend'; check plugins and input shapes"))
        return outputs

    def _run_graph(self, loaded: _Loaded, tensors: list[torch.Tensor], profile: int) -> list[torch.Tensor]:
        context = self._context(loaded)
        key = (profile,) + tuple((tuple(t.shape), t.dtype) for t in tensors)
        graphs: dict[Any, Any] = loaded.local.graphs
        entry = graphs.get(key)
        if entry is None:
            if len(graphs) >= MAX_CUDA_GRAPHS_PER_THREAD:
                return self._run(loaded, context, tensors, profile)  # too many shapes: run without a graph
            static_in = [t.clone() for t in tensors]
            static_out = self._run(loaded, context, static_in, profile)  # warm-up outside capture (TensorRT needs it)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                if not context.execute_async_v3(torch.cuda.current_stream().cuda_stream):
                    raise EngineCompatibilityError(failure("capturing execute_async_v3 in a CUDA graph failed",
                                                           "a capturable engine", "use cuda_graphs=False"))
            graphs[key] = entry = (graph, static_in, static_out)
            return [o.clone() for o in static_out]
        graph, static_in, static_out = entry
        for dst, src in zip(static_in, tensors):
            dst.copy_(src)
        graph.replay()
        return [o.clone() for o in static_out]


def load(path: str | os.PathLike[str], *, cuda_graphs: bool = False) -> TRTModule:
    """Load an engine file written by ``TRTModule.save`` / ``Engine.save``.

    Checks the TensorRT version (and, where a GPU is present, its architecture) before returning, and deserializes
    eagerly when a GPU is present so incompatibilities surface here rather than at the first call.
    """
    engine = Engine.load(path)
    api = load_backend(engine.metadata.backend)
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else None
    check_compatible(engine.metadata, api, device)
    module = TRTModule(engine, cuda_graphs=cuda_graphs)
    if device is not None:
        module.load_engine(device)
    return module
