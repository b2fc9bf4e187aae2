"""TRTModule's orchestration of TensorRT calls, checked on a CPU machine with stand-ins (named as such).

Nothing here proves what TensorRT accepts: the stand-in execution context refuses what NvInferRuntime.h documents
TensorRT refuses (a shape outside the selected profile, a null or not 256-byte aligned address, an unknown tensor, an
enqueue with an unbound input or output), and records every call; the stand-in streams and CUDA graphs record what
torch would be asked to do. The real engine runs in tests/test_runtime.py (markers gpu + tensorrt).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from torchtrt_ext.backend.engine import Engine, EngineMetadata, TensorInfo
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.backend.profiles import Profile
from torchtrt_ext.errors import EngineCompatibilityError, InvalidInputError
from torchtrt_ext.runtime import ALIGNMENT, TRTModule, _Loaded, check_bindings, tensor_address

PROFILES = (Profile({"x": ((0, 3), (2, 3), (4, 3))}), Profile({"x": ((5, 3), (8, 3), (16, 3))}))


class StandInContext:
    """IExecutionContext as NvInferRuntime.h documents it, for an engine whose output "y" has the shape of input "x"."""

    def __init__(self, engine: StandInEngine) -> None:
        self.engine, self.profile, self.shapes, self.addresses = engine, 0, {}, {}
        self.capturable = engine.capturable

    def set_optimization_profile_async(self, index: int, stream: int) -> bool:
        if not 0 <= index < len(PROFILES):
            return False
        self.engine.calls.append(("profile", index, stream))
        self.profile, self.shapes = index, {}  # a new profile: input shapes must be set again
        return True

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        if name != "x":
            return False
        low, high = PROFILES[self.profile]["x"].min, PROFILES[self.profile]["x"].max
        if len(shape) != len(low) or not all(lo <= d <= hi for lo, d, hi in zip(low, shape, high)):
            return False
        self.shapes[name] = tuple(shape)
        return True

    def set_tensor_address(self, name: str, address: int) -> bool:
        if name not in ("x", "y") or address == 0 or address % ALIGNMENT:
            return False
        self.addresses[name] = address
        return True

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return self.shapes.get("x", (-1, 3)) if name in ("x", "y") else (-1,)

    def is_stream_capturable(self, stream: int) -> bool:  # TensorRT-RTX's IExecutionContext::isStreamCapturable
        return self.capturable

    def execute_async_v3(self, stream: int) -> bool:
        if "x" not in self.shapes or set(self.addresses) != {"x", "y"}:
            return False
        self.engine.calls.append(("enqueue", id(self), stream))
        return True

    def state(self) -> tuple[Any, ...]:
        return self.profile, dict(self.shapes), dict(self.addresses)


class StandInEngine:
    def __init__(self, capturable: bool = True) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.contexts: list[StandInContext] = []
        self.capturable = capturable

    def create_execution_context(self) -> StandInContext:
        self.contexts.append(StandInContext(self))
        return self.contexts[-1]


class StandInStream:
    """A torch.cuda.Stream stand-in that records the waits torch would enqueue."""

    def __init__(self, name: str, handle: int, calls: list[tuple[Any, ...]]) -> None:
        self.name, self.cuda_stream, self.calls = name, handle, calls

    def wait_stream(self, other: StandInStream) -> None:
        self.calls.append(("wait", self.name, other.name))


class StandInGraph:
    """torch.cuda.CUDAGraph stand-in: a replay re-runs the enqueue captured, on the context state of that moment."""

    def __init__(self) -> None:
        self.captured: tuple[StandInContext, tuple[Any, ...]] | None = None
        self.capture_error_mode = ""

    def replay(self) -> None:
        assert self.captured is not None
        context, state_at_capture = self.captured
        context.engine.calls.append(("replay", id(context), context.state() == state_at_capture))


def metadata(out_dtype: str = "float32") -> EngineMetadata:
    return EngineMetadata(inputs=(TensorInfo("x", "float32", (-1, 3)),), outputs=(TensorInfo("y", out_dtype, (-1, 3)),),
                          profiles=PROFILES, options=BuildOptions(), target=Target("tensorrt", "10.13"))


@pytest.fixture
def engine() -> StandInEngine:
    return StandInEngine()


@pytest.fixture
def streams(engine: StandInEngine, monkeypatch: pytest.MonkeyPatch) -> list[StandInStream]:
    """torch's current stream is "caller"; every torch.cuda.Stream() made is recorded."""
    made: list[StandInStream] = []
    caller = StandInStream("caller", 0, engine.calls)  # 0: the legacy default stream, torch's usual current stream

    def new_stream(device: Any = None) -> StandInStream:
        made.append(StandInStream(f"engine{len(made)}", 0x1000 * (len(made) + 1), engine.calls))
        return made[-1]

    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: caller)
    monkeypatch.setattr(torch.cuda, "Stream", new_stream)
    return made


@pytest.fixture
def graphs(engine: StandInEngine, monkeypatch: pytest.MonkeyPatch) -> list[StandInGraph]:
    made: list[StandInGraph] = []

    def new_graph() -> StandInGraph:
        made.append(StandInGraph())
        return made[-1]

    @contextlib.contextmanager
    def capture(graph: StandInGraph, stream: StandInStream | None = None, capture_error_mode: str = "global"
                ) -> Iterator[None]:
        graph.capture_error_mode = capture_error_mode  # torch's default: "global"
        before = len(engine.calls)
        yield
        enqueues = [c for c in engine.calls[before:] if c[0] == "enqueue"]
        assert len(enqueues) == 1 and stream is not None and enqueues[0][2] == stream.cuda_stream
        context = next(c for c in engine.contexts if id(c) == enqueues[0][1])
        graph.captured = (context, context.state())

    monkeypatch.setattr(torch.cuda, "CUDAGraph", new_graph)
    monkeypatch.setattr(torch.cuda, "graph", capture)
    return made


def loaded_module(engine: StandInEngine, out_dtype: str = "float32") -> tuple[TRTModule, _Loaded]:
    module = TRTModule(Engine(b"plan", metadata(out_dtype)))
    return module, _Loaded(None, None, engine, torch.device("cpu"), threading.local())  # type: ignore[arg-type]


def test_enqueues_on_a_private_stream_ordered_after_and_before_the_caller(engine: StandInEngine,
                                                                          streams: list[StandInStream]) -> None:
    module, loaded = loaded_module(engine)
    x = torch.randn(2, 3)
    y = module._run(loaded, module._context(loaded), [x], 0)
    assert tuple(y[0].shape) == (2, 3) and engine.contexts[0].addresses["y"] == tensor_address(y[0])
    module._run(loaded, module._context(loaded), [x], 0)
    assert len(streams) == 1 and streams[0].cuda_stream != 0  # one private stream per thread, not the default one
    enqueue = ("enqueue", id(engine.contexts[0]), streams[0].cuda_stream)
    assert engine.calls[:3] == [("wait", "engine0", "caller"), enqueue, ("wait", "caller", "engine0")]
    assert engine.calls == engine.calls[:3] * 2

    worker = threading.Thread(target=lambda: module._run(loaded, module._context(loaded), [x], 0))
    worker.start()
    worker.join()
    assert len(streams) == 2 and len(engine.contexts) == 2  # another thread: its own context and stream


@pytest.mark.parametrize("make", [lambda: torch.randn(5, 3)[1:], lambda: torch.randn(4, 6)[:, :3],
                                  lambda: torch.empty(0, 3)], ids=["offset-slice", "strided", "empty"])
def test_inputs_tensorrt_cannot_take_in_place_are_bound_through_aligned_copies(
        engine: StandInEngine, streams: list[StandInStream], make: Any) -> None:
    module, loaded = loaded_module(engine)
    x = make()
    outputs = module._run(loaded, module._context(loaded), [x], 0)
    context = engine.contexts[0]
    bound = context.addresses["x"]
    assert bound != 0 and bound % ALIGNMENT == 0 and context.addresses["y"] % ALIGNMENT == 0
    copy = next(t for t in module._context(loaded).bound if tensor_address(t) == bound)
    assert copy.is_contiguous() and torch.equal(copy, x) and copy is not x
    assert tuple(outputs[0].shape) == tuple(x.shape)


def test_a_shape_tensorrt_refuses_is_reported_with_the_input_and_range(engine: StandInEngine,
                                                                        streams: list[StandInStream]) -> None:
    module, loaded = loaded_module(engine)
    with pytest.raises(InvalidInputError, match=r"TensorRT refused the shape \(9, 3\) of input 'x' \(profile 0: "
                                                r"min \(0, 3\), opt \(2, 3\), max \(4, 3\)\)"):
        module._run(loaded, module._context(loaded), [torch.randn(9, 3)], 0)
    assert not [c for c in engine.calls if c[0] == "enqueue"]


def test_a_refused_address_is_reported_not_left_to_the_enqueue(engine: StandInEngine,
                                                                streams: list[StandInStream],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    module, loaded = loaded_module(engine)
    monkeypatch.setattr(StandInContext, "set_tensor_address", lambda self, name, address: name != "y")
    with pytest.raises(EngineCompatibilityError, match=r"TensorRT refused the address 0x[0-9a-f]+ of output 'y'"):
        module._run(loaded, module._context(loaded), [torch.randn(2, 3)], 0)


def test_a_profile_switch_is_checked_and_enqueued_on_the_private_stream(engine: StandInEngine,
                                                                         streams: list[StandInStream]) -> None:
    module, loaded = loaded_module(engine)
    module._run(loaded, module._context(loaded), [torch.randn(8, 3)], 1)
    assert engine.calls[0] == ("profile", 1, streams[0].cuda_stream)
    with pytest.raises(EngineCompatibilityError, match="refused to switch the execution context to optimization "
                                                       "profile 2"):
        module._run(loaded, module._context(loaded), [torch.randn(8, 3)], 2)


@pytest.mark.parametrize("dtype", ["fp4", "int4", "e8m0"])
def test_output_types_torch_lacks_are_refused_by_name(engine: StandInEngine, streams: list[StandInStream],
                                                      dtype: str) -> None:
    module, loaded = loaded_module(engine, out_dtype=dtype)
    pattern = rf"engine output 'y' has type {dtype}, which torch .* cannot hold element for element"
    with pytest.raises(EngineCompatibilityError, match=pattern):
        check_bindings(module.metadata, engine, None)  # type: ignore[arg-type]
    with pytest.raises(EngineCompatibilityError, match=pattern):
        module._run(loaded, module._context(loaded), [torch.randn(2, 3)], 0)


def test_float8_outputs_are_allocated_as_torch_float8(engine: StandInEngine, streams: list[StandInStream]) -> None:
    module, loaded = loaded_module(engine, out_dtype="float8_e8m0fnu")
    (y,) = module._run(loaded, module._context(loaded), [torch.randn(2, 3)], 0)
    assert y.dtype == torch.float8_e8m0fnu and tuple(y.shape) == (2, 3)


def test_shape_tensor_inputs_are_refused_at_load(rtx: str, engine: StandInEngine,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from torchtrt_ext.backend.adapter import load_backend

    api = load_backend(rtx)  # the real TensorLocation enum
    monkeypatch.setattr(StandInEngine, "get_tensor_location", lambda self, name: api.trt.TensorLocation.HOST,
                        raising=False)
    with pytest.raises(EngineCompatibilityError, match=r"engine input 'x' is a shape tensor: tensorrt_rtx reads its "
                                                       r"values on the host"):
        check_bindings(metadata(), engine, api)
    monkeypatch.setattr(StandInEngine, "get_tensor_location", lambda self, name: api.trt.TensorLocation.DEVICE)
    check_bindings(metadata(), engine, api)


def test_each_cuda_graph_replays_the_state_it_was_captured_with(engine: StandInEngine, streams: list[StandInStream],
                                                                graphs: list[StandInGraph]) -> None:
    """Capture A (profile 0), then B (profile 1), then replay A: A's context must still hold A's profile, shapes and
    addresses (a replay runs no enqueueV3 that would re-apply them)."""
    module, loaded = loaded_module(engine)
    module._run_graph(loaded, [torch.randn(2, 3)], 0)  # capture A
    module._run_graph(loaded, [torch.randn(8, 3)], 1)  # capture B
    module._run(loaded, module._context(loaded), [torch.randn(3, 3)], 0)  # an eager call in between
    module._run_graph(loaded, [torch.randn(2, 3)], 0)  # replay A
    module._run_graph(loaded, [torch.randn(8, 3)], 1)  # replay B
    replays = [c for c in engine.calls if c[0] == "replay"]
    assert [ok for _, _, ok in replays] == [True, True]
    assert len({ctx for _, ctx, _ in replays}) == 2 and len(graphs) == 2
    main = module._context(loaded).context
    assert all(ctx != id(main) for _, ctx, _ in replays)


def test_graphs_are_captured_in_thread_local_mode(engine: StandInEngine, streams: list[StandInStream],
                                                  graphs: list[StandInGraph]) -> None:
    """torch's default "global" mode makes another thread's allocation or sync during the capture fail and
    invalidate it; thread_local confines the rule to the capturing thread (GPU test below)."""
    module, loaded = loaded_module(engine)
    module._run_graph(loaded, [torch.randn(2, 3)], 0)
    assert [g.capture_error_mode for g in graphs] == ["thread_local"]


class GpuWorkContext(StandInContext):
    """The stand-in context, whose enqueue also runs real GPU work on the given stream and, while that stream is
    being captured, calls ``during_capture``."""

    def __init__(self, engine: StandInEngine, during_capture: Any) -> None:
        super().__init__(engine)
        self.during_capture = during_capture

    def execute_async_v3(self, stream: int) -> bool:
        if not super().execute_async_v3(stream):
            return False
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)):
            torch.ones(1 << 16, device="cuda").mul_(2)
            if torch.cuda.is_current_stream_capturing():
                self.during_capture()
        return True


@pytest.mark.gpu
def test_another_thread_allocating_during_a_capture_breaks_neither(monkeypatch: pytest.MonkeyPatch) -> None:
    """Real torch CUDA graphs and allocator on a GPU: while the engine's enqueue is being captured, a second thread
    allocates device memory (a cudaMalloc: a size the cache cannot hold yet). In "global" capture mode that call fails
    and invalidates the capture; in thread_local mode both succeed and the graph replays."""
    errors: list[BaseException] = []

    def allocate_in_another_thread() -> None:
        def work() -> None:
            try:
                torch.empty((333 << 20) + (len(errors) << 21), dtype=torch.uint8, device="cuda")
            except BaseException as exc:  # noqa: BLE001 - reported by the assert below
                errors.append(exc)

        other = threading.Thread(target=work)
        other.start()
        other.join(30)

    engine = StandInEngine()
    monkeypatch.setattr(engine, "create_execution_context",
                        lambda: engine.contexts.append(GpuWorkContext(engine, allocate_in_another_thread))
                        or engine.contexts[-1])
    module = TRTModule(Engine(b"plan", metadata()))
    loaded = _Loaded(None, None, engine, torch.device("cuda"), threading.local())  # type: ignore[arg-type]
    x = torch.randn(2, 3, device="cuda")
    module._run_graph(loaded, [x], 0)  # warm-up and capture
    module._run_graph(loaded, [x], 0)  # replay
    torch.cuda.synchronize()
    assert errors == []
    assert [c[0] for c in engine.calls].count("enqueue") == 2  # warm-up and capture; the replay is the graph's
    assert all(entry is not None for entry in loaded.local.graphs.values()) and len(loaded.local.graphs) == 1


def test_an_engine_tensorrt_cannot_capture_runs_without_a_graph(streams: list[StandInStream],
                                                                graphs: list[StandInGraph],
                                                                caplog: pytest.LogCaptureFixture) -> None:
    engine = StandInEngine(capturable=False)
    module, loaded = loaded_module(engine)
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext.runtime"):
        for _ in range(3):
            (y,) = module._run_graph(loaded, [torch.randn(2, 3)], 0)
            assert tuple(y.shape) == (2, 3)
    assert not graphs and [c[0] for c in engine.calls].count("enqueue") == 3  # the warm-up serves the first call
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "is_stream_capturable is False" in caplog.records[0].message


@pytest.mark.parametrize("embedded,here,ok", [(True, "10.13.0.35", True), (True, "10.14.1.48", True),
                                              (True, "10.12.0.36", False), (True, "11.0.0.114", False),
                                              (False, "10.14.1.48", False)])
def test_version_compatible_engines_run_on_newer_tensorrt_of_the_same_major(embedded: bool, here: str,
                                                                             ok: bool) -> None:
    """Embedding the plugin library sets VERSION_COMPATIBLE, which TensorRT documents as runnable on newer TensorRT
    versions of the same major version; other engines need the exact version (a stand-in api: only its version)."""
    import types

    from torchtrt_ext.backend.adapter import TRTApi
    from torchtrt_ext.runtime import check_compatible

    meta = dataclasses.replace(metadata(), target=Target("tensorrt", "10.13.0.35"), plugins_embedded=embedded)
    api = TRTApi("tensorrt", types.SimpleNamespace(__version__=here))
    if ok:
        check_compatible(meta, api, None)
    else:
        with pytest.raises(EngineCompatibilityError, match=r"built with tensorrt 10\.13\.0\.35, this machine has "
                                                           rf"tensorrt {here}"):
            check_compatible(meta, api, None)


@pytest.mark.parametrize("backend,ok", [("tensorrt_rtx", True), ("tensorrt", False)])
def test_only_tensorrt_engines_are_held_to_their_gpu(backend: str, ok: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorRT-RTX engines are portable across GPU architectures (RTX docs: built for 8.0-12.0 by default)."""
    import types

    from torchtrt_ext.backend.adapter import TRTApi
    from torchtrt_ext.runtime import check_compatible

    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device: "NVIDIA H200")
    meta = dataclasses.replace(metadata(), target=Target(backend, "10.13", "NVIDIA GeForce RTX 4090", "8.9"))
    api = TRTApi(backend, types.SimpleNamespace(__version__=meta.trt_version))
    if ok:
        check_compatible(meta, api, torch.device("cuda", 0))
    else:
        with pytest.raises(EngineCompatibilityError, match=r"built for NVIDIA GeForce RTX 4090 \(compute capability "
                                                           r"8\.9\), this GPU is NVIDIA H200"):
            check_compatible(meta, api, torch.device("cuda", 0))
