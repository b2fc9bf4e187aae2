"""``validate``: run a reference model and a compiled candidate on the same inputs and report, per output, how close
they are.

Per output (outputs are matched through pytree flattening and named like the exporter names them,
``export.output_names``: ``output`` for one tensor, else the path to it, like ``a.0``, ``b.c`` or ``output_1``), in
this order:

1. **shape**: a shape mismatch fails the output and stops its comparison;
2. **non-finite values**: a NaN or inf in one and not at the same place in the other fails the output
   (docs/design.md#failures-and-remedies: NaN outputs usually mean a plugin was fed FP16 it does not handle);
3. **errors**, computed in float64: max abs diff, max rel diff (``|got - ref| / |ref|`` over elements where
   ``ref != 0``), cosine similarity of the flattened outputs, and ``min_atol``, the smallest ``atol`` for which
   every element satisfies ``|got - ref| <= atol + rtol * |ref|`` at the report's ``rtol``. The output passes when
   ``min_atol <= atol``. Integer and bool outputs must match exactly.

Default tolerances by precision (``precision=None``: from the candidate's build settings where it has them, else from
the lowest-precision floating dtype among the inputs and the two outputs). An element passes when
``|got - ref| <= atol + rtol * |ref|``: ``atol`` is the bar near zero, ``rtol`` lets it grow with the magnitude, as a
floating-point format's spacing does (boxes in pixels, logits in the tens)::

    precision   atol    rtol    why
    fp32        1e-4    1e-3    TensorRT runs FP32 convolutions and matmuls in TF32 unless told otherwise
    fp16        1e-2    5e-3    the usual bar near 1: max abs diff < 1e-2 (docs/design.md#validation-and-timing);
                                11 significant bits, one ulp is 9.8e-4 relative (0.0625 at 64): ~5 ulps
    bf16        5e-2    2e-2    8 significant bits: one ulp is 7.8e-3 relative (0.5 at 64): ~2.5 ulps
    exact       0       0       integer and bool outputs

``inputs``: a tensor or a tuple of tensors (trial 0 uses them as given; later trials use fresh random tensors of the
same shapes, dtypes and devices: ``randn`` for floats, integers drawn from the example's own value range, random
bools), or None to take the shapes and dtypes from the candidate or the reference (an ONNX model's graph inputs with
dynamic dims set to 1, or a TRTModule's engine metadata at its first profile's opt shape; integers then lie in
``DEFAULT_INT_RANGE``, [0, 8), since ONNX cannot tell an Embedding's size).

Candidates and references can be any callable on torch tensors, a ``TRTModule``, or an ONNX model (``ModelProto`` or
path), which runs on onnxruntime (CPU by default) after its torchtrt_ext custom nodes are decomposed into standard
ONNX ops — so a CPU-only user can validate an export.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import logging
import math
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import onnx
import torch

from torchtrt_ext._files import onnx_file_of
from torchtrt_ext import _ort_worker
from torchtrt_ext._ort_worker import LEVELS as ORT_GRAPH_OPTIMIZATIONS
from torchtrt_ext._ort_worker import open_session
from torchtrt_ext.errors import (
    InvalidInputError,
    MissingDependencyError,
    RuntimeCrashError,
    TorchTRTExtError,
    ValidationFailedError,
    failure,
)
from torchtrt_ext.export import output_names
from torchtrt_ext.ops.spec import torch_dtype
from torchtrt_ext.passes import decompose_custom_ops
from torchtrt_ext.passes.graph_check import check_wiring
from torchtrt_ext.passes.onnx_util import custom_nodes
from torchtrt_ext.passes.onnx_util import read_onnx
from torchtrt_ext.passes.shapes import too_big

#: precision -> (atol, rtol); see the module docstring for the reasons.
TOLERANCES: dict[str, tuple[float, float]] = {
    "fp32": (1e-4, 1e-3),
    "fp16": (1e-2, 5e-3),
    "bf16": (5e-2, 2e-2),
    "exact": (0.0, 0.0),
}
PRECISIONS = ("fp32", "fp16", "bf16")
_DTYPE_PRECISION = {torch.float16: "fp16", torch.bfloat16: "bf16"}
log = logging.getLogger("torchtrt_ext")
_ORT_HINT = "pip install 'torchtrt_ext[dev]' (or: pip install onnxruntime)"


# ------------------------------------------------------------------------------------------------ the report
@dataclasses.dataclass(frozen=True)
class OutputComparison:
    """How one output of the candidate compares with the reference, worst case over all trials."""

    name: str
    ref_shape: tuple[int, ...]
    got_shape: tuple[int, ...] | None
    ref_dtype: str
    got_dtype: str | None
    atol: float
    rtol: float
    passed: bool
    reason: str = ""  # why it failed ("" when it passed)
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    cosine: float | None = None
    min_atol: float | None = None  # the smallest atol that would pass at this rtol

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["ref_shape"] = list(self.ref_shape)
        data["got_shape"] = None if self.got_shape is None else list(self.got_shape)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """The result of ``validate``: one ``OutputComparison`` per reference output."""

    outputs: tuple[OutputComparison, ...]
    precision: str
    atol: float
    rtol: float
    trials: int
    reference: str
    candidate: str
    error: str = ""  # a failure that is not about one output (the candidate raised, output count differs)

    @property
    def passed(self) -> bool:
        return not self.error and all(o.passed for o in self.outputs)

    @property
    def failed_outputs(self) -> list[str]:
        return [o.name for o in self.outputs if not o.passed]

    def check(self) -> ValidationReport:
        """Return self when every output passed; raise ``ValidationFailedError`` naming the failures otherwise."""
        if not self.passed:
            what = self.error or "; ".join(f"{o.name}: {o.reason}" for o in self.outputs if not o.passed)
            raise ValidationFailedError(failure(
                f"{self.candidate} does not match {self.reference} ({what})",
                f"every output within atol={self.atol:g}, rtol={self.rtol:g} ({self.precision})",
                "compare in FP32 first (precision='fp32'); if FP32 passes and FP16 fails, keep the failing part in "
                "FP32; NaN outputs mean a plugin was fed a precision it does not handle"))
        return self

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "precision": self.precision, "atol": self.atol, "rtol": self.rtol,
                "trials": self.trials, "reference": self.reference, "candidate": self.candidate,
                "error": self.error or None, "outputs": [o.to_json() for o in self.outputs]}

    def to_table(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        head = (f"validate {self.candidate} against {self.reference}: {verdict} "
                f"({self.precision}: atol={self.atol:g}, rtol={self.rtol:g}; {self.trials} trial(s))")
        rows = [[o.name, _shape_cell(o), _num(o.max_abs_diff), _num(o.max_rel_diff), _num(o.cosine, ".6f"),
                 _num(o.min_atol), "pass" if o.passed else f"FAIL: {o.reason}"] for o in self.outputs]
        table = format_table(["output", "shape", "max abs", "max rel", "cosine", "min atol", "result"], rows)
        return "\n".join([head, table] + ([f"error: {self.error}"] if self.error else []))

    def __str__(self) -> str:
        return self.to_table()


def _shape_cell(o: OutputComparison) -> str:
    ref = "x".join(map(str, o.ref_shape)) or "scalar"
    if o.got_shape is None or o.got_shape == o.ref_shape:
        return ref
    return f"{'x'.join(map(str, o.got_shape)) or 'scalar'} (ref {ref})"


def _num(value: float | None, fmt: str = ".3g") -> str:
    return "-" if value is None else format(value, fmt)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table with aligned columns (shared by the validation and benchmark reports)."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)] if rows else [len(h) for h in headers]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(str(h).ljust(w) for h, w in zip(headers, widths)).rstrip(), line]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------- ONNX as a callable
class OnnxRuntimeModule:
    """Make an ONNX model callable on torch tensors through onnxruntime.

    torchtrt_ext custom nodes are decomposed into standard ONNX ops first (``passes.decompose_custom_ops``), so any
    onnxruntime runs it. Outputs come back as torch tensors on the device of the first input; one output is returned
    as a tensor, several as a tuple (the order of the graph outputs, named in ``output_names``).

    Args:
        model: an ``onnx.ModelProto`` or the path of an .onnx file.
        providers: onnxruntime execution providers. Default: None (``["CPUExecutionProvider"]``).
        isolated: run onnxruntime in a process of its own (about 0.5 s to start), so that a crash inside it raises
            ``RuntimeCrashError`` naming the model, after one retry with graph optimizations off, instead of killing
            this interpreter. False runs it in this process (what timing needs). Default: True.
        graph_optimization: onnxruntime's graph optimization level, "all", "basic" or "disable". Default: "all".
    """

    def __init__(self, model: Any, providers: Sequence[str] | None = None, *, isolated: bool = True,
                 graph_optimization: str = "all") -> None:
        if isinstance(model, (str, os.PathLike)):
            self.source = Path(model).name
            model = read_onnx(model)
        elif isinstance(model, onnx.ModelProto):
            self.source = model.graph.name or "onnx model"
        else:
            raise InvalidInputError(failure(f"OnnxRuntimeModule got a {type(model).__name__}",
                                            "an onnx.ModelProto or an .onnx path", "pass the exported model"))
        check_wiring(model, f"ONNX model {self.source}")  # onnxruntime's own refusal is a bare error (exit 5)
        if graph_optimization not in ORT_GRAPH_OPTIMIZATIONS:
            raise InvalidInputError(failure(f"graph_optimization={graph_optimization!r}",
                                            f"one of {sorted(ORT_GRAPH_OPTIMIZATIONS)}", "pass 'all' or 'disable'"))
        ort = _import_onnxruntime()
        if custom_nodes(model):
            model = decompose_custom_ops(model)
        self.model = model
        self.providers = list(providers or ["CPUExecutionProvider"])
        self.isolated = isolated
        self.graph_optimization = graph_optimization
        self._worker: _OrtWorker | None = None
        self._session: Any = None
        if not isolated:
            with self._loadable() as loadable:
                self._session = open_session(ort, loadable, self.providers, graph_optimization)
            inputs = [(i.name, list(i.shape), i.type) for i in self._session.get_inputs()]
            outputs = [o.name for o in self._session.get_outputs()]
        else:
            with self._loadable() as loadable:
                inputs, outputs = self._ask("open", loadable, self.providers)
        self._inputs = inputs
        self.input_names = [name for name, _, _ in inputs]
        self.output_names = list(outputs)

    def _ask(self, kind: str, *payload: Any) -> Any:
        """Send one request to the worker process (started on first use); a crash with graph optimizations on is
        retried once with them off (the known onnxruntime crashes are in its optimizer), then raised."""
        for attempt in range(2):
            if self._worker is None:
                self._worker = _OrtWorker(self.source)
                if kind == "run":  # a new worker needs the session first
                    with self._loadable() as loadable:
                        self._worker.request(("open", loadable, self.providers, self.graph_optimization), "loading")
            try:
                request = (kind, *payload, self.graph_optimization) if kind == "open" else (kind, *payload)
                return self._worker.request(request, "loading" if kind == "open" else "running")
            except RuntimeCrashError as exc:
                self._worker = None
                if attempt or self.graph_optimization == "disable":
                    raise
                log.warning("%s; retrying with onnxruntime's graph optimizations off", exc.what)
                self.graph_optimization = "disable"
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def _loadable(self) -> Iterator[bytes | str]:
        """What onnxruntime opens: the serialized model, or, over protobuf's 2 GiB limit, the path of a temporary file
        with external data (onnxruntime reads the weights while it opens the session)."""
        if too_big(self.model):
            with onnx_file_of(self.model) as path:
                yield str(path)
        else:
            yield self.model.SerializeToString()

    def input_specs(self) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
        """(name, shape with dynamic dims set to 1, torch dtype) per graph input."""
        initializers = {i.name for i in self.model.graph.initializer}
        specs = []
        for value in self.model.graph.input:
            if value.name in initializers:
                continue
            tensor = value.type.tensor_type
            shape = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in tensor.shape.dim)
            dtype = torch_dtype(tensor.elem_type)
            if dtype is None:
                raise InvalidInputError(failure(f"ONNX input {value.name!r} has element type {tensor.elem_type}",
                                                "a float, int or bool input", "pass inputs explicitly"))
            specs.append((value.name, shape, dtype))
        return specs

    def __call__(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> Any:
        if len(args) > len(self.input_names):
            raise InvalidInputError(failure(f"{self.source} got {len(args)} inputs", f"at most {self.input_names}",
                                            "pass one tensor per graph input"))
        feeds = dict(zip(self.input_names, args))
        feeds.update(kwargs)
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise InvalidInputError(failure(f"{self.source}: inputs {missing} were not given",
                                            f"inputs {self.input_names}", "pass one tensor per graph input"))
        device = next((t.device for t in feeds.values() if isinstance(t, torch.Tensor)), torch.device("cpu"))
        declared = {name: dtype for name, _, dtype in self.input_specs()}
        arrays = {k: _as_numpy(v, declared.get(k)) if isinstance(v, torch.Tensor) else v for k, v in feeds.items()}
        try:
            results = self._session.run(None, arrays) if self._session is not None else self._ask("run", arrays)
        except (RuntimeCrashError, OnnxRuntimeRefusal):
            raise
        except Exception as exc:  # noqa: BLE001 - onnxruntime's own error types; its detail is on later lines
            given = {k: (tuple(a.shape), str(a.dtype)) for k, a in arrays.items()}
            expected = {name: (tuple(shape), kind) for name, shape, kind in self._inputs}
            raise InvalidInputError(failure(
                f"onnxruntime failed to run {self.source}: {' '.join(str(exc).split())}; given {given}",
                f"inputs {expected}", "pass inputs of the shapes and dtypes the model was exported with "
                "(--input-shape, --dtype)")) from None
        outs = [torch.from_numpy(o).to(device) for o in results]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self) -> str:
        return f"OnnxRuntimeModule({self.source}, providers={self.providers})"


class OnnxRuntimeRefusal(InvalidInputError):
    """onnxruntime raised on a request (the worker's reply); ``OnnxRuntimeModule.__call__`` words it for its inputs."""


class _OrtWorker:
    """``_ort_worker.py`` in a child process: one onnxruntime session, requests over pipes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, str(Path(_ort_worker.__file__))], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr)
        weakref.finalize(self, _stop, self.proc, self.stderr)

    def request(self, message: tuple[Any, ...], doing: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            pickle.dump(message, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.proc.stdin.flush()
            status, *reply = pickle.load(self.proc.stdout)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError):
            raise self._crashed(doing, message) from None
        if status == "error":
            if message[0] == "open":
                raise OnnxRuntimeRefusal(failure(
                    f"onnxruntime cannot load {self.source}: {' '.join(reply[0].split())}",
                    "a model onnxruntime accepts", "check the export (onnx.checker.check_model(path, full_check=True))"
                    "; if the graph is valid, report it to onnxruntime and validate the engine instead"))
            raise RuntimeError(reply[0])
        return reply if message[0] == "open" else reply[0]

    def _crashed(self, doing: str, message: tuple[Any, ...]) -> RuntimeCrashError:
        code = self.proc.wait()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        self.stderr.seek(0)
        last = [line for line in self.stderr.read().decode(errors="replace").splitlines() if line.strip()][-1:]
        optimization = message[-1] if message[0] == "open" else "?"
        return RuntimeCrashError(failure(
            f"onnxruntime crashed ({how}) {doing} {self.source}" + (f": {last[0].strip()}" if last else ""),
            "onnxruntime to run the reference model or raise an error",
            "validate with onnxruntime's graph optimizations off (OnnxRuntimeModule(path, "
            "graph_optimization='disable')), validate the engine against the PyTorch model instead, or report the "
            f"model to onnxruntime (graph optimization: {optimization})"))


def _stop(proc: subprocess.Popen[bytes], stderr: Any) -> None:
    for stream in (proc.stdin, proc.stdout):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    stderr.close()


def _as_numpy(tensor: torch.Tensor, declared: torch.dtype | None) -> Any:
    """``tensor`` as a NumPy array for onnxruntime. A floating tensor meets a wider floating input in the dtype the
    graph declares (exact: a bf16 or fp16 reference compared with an fp32 export); NumPy has no bfloat16."""
    tensor = tensor.detach().cpu()
    if (declared is not None and tensor.dtype.is_floating_point and declared.is_floating_point
            and (tensor.dtype == torch.bfloat16 or tensor.dtype.itemsize < declared.itemsize)):
        tensor = tensor.to(declared)
    return tensor.numpy()


def _import_onnxruntime() -> Any:
    try:
        return importlib.import_module("onnxruntime")
    except ImportError:
        raise MissingDependencyError(failure("onnxruntime is not installed", "onnxruntime >= 1.20",
                                             _ORT_HINT)) from None


def as_callable(obj: Any, *, isolated: bool = True) -> Callable[..., Any]:
    """Anything ``validate`` and ``benchmark`` accept, as a callable on torch tensors.

    ONNX models (``ModelProto``, or a path ending in .onnx) become ``OnnxRuntimeModule`` (``isolated``: in a process
    of its own, see there); callables are returned as they are.
    """
    if isinstance(obj, onnx.ModelProto) or (isinstance(obj, (str, os.PathLike)) and str(obj).endswith(".onnx")):
        return OnnxRuntimeModule(obj, isolated=isolated)
    if callable(obj):
        return obj
    raise InvalidInputError(failure(f"cannot run a {type(obj).__name__}",
                                    "a callable on torch tensors, a TRTModule, or an ONNX model or .onnx path",
                                    "pass the model itself"))


def describe(obj: Any) -> str:
    """A short name for reports: the ONNX file name, the module class, or the function name."""
    if isinstance(obj, OnnxRuntimeModule):
        return f"{obj.source} (onnxruntime)"
    if isinstance(obj, (str, os.PathLike)):
        return Path(obj).name
    if isinstance(obj, torch.nn.Module):
        return type(obj).__name__
    return getattr(obj, "__name__", type(obj).__name__)


# ---------------------------------------------------------------------------------------------------- inputs
def _as_tuple(inputs: Any) -> tuple[torch.Tensor, ...]:
    if isinstance(inputs, torch.Tensor):
        return (inputs,)
    if isinstance(inputs, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in inputs):
        return tuple(inputs)
    raise InvalidInputError(failure(f"inputs is a {type(inputs).__name__}", "a tensor or a tuple of tensors",
                                    "pass example inputs like (x,) or None to derive them from the model"))


def _metadata(obj: Any) -> Any:
    """The engine metadata of a TRTModule or Engine (anything with ``.metadata.inputs``), else None."""
    try:
        metadata = getattr(obj, "metadata", None)
    except Exception:  # noqa: BLE001 - e.g. a TRTModule without an engine raises from its property
        return None
    return metadata if getattr(metadata, "inputs", None) is not None else None


def input_specs_of(obj: Any) -> list[tuple[tuple[int, ...], torch.dtype]] | None:
    """Input shapes and dtypes an object declares: an ONNX model's graph inputs or a TRTModule's engine metadata."""
    if isinstance(obj, OnnxRuntimeModule):
        return [(shape, dtype) for _, shape, dtype in obj.input_specs()]
    metadata = _metadata(obj)
    if metadata is not None and getattr(metadata, "inputs", None):
        profile = metadata.profiles[0] if getattr(metadata, "profiles", None) else {}
        specs = []
        for info in metadata.inputs:
            shape = tuple(profile[info.name].opt) if info.name in profile else tuple(max(d, 1) for d in info.shape)
            specs.append((shape, getattr(torch, info.dtype)))
        return specs
    return None


def preferred_device(obj: Any) -> torch.device | None:
    """Where ``obj`` wants its inputs: CUDA for an engine (TRTModule), a module's parameter device, else None."""
    if _metadata(obj) is not None:
        return torch.device("cuda")  # an engine runs on the GPU
    if isinstance(obj, torch.nn.Module):
        for tensor in list(obj.parameters()) + list(obj.buffers()):
            return tensor.device
    return None


def random_like(example: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A random tensor of the example's shape, dtype and device (floats ~ N(0, 1); ints in the example's range)."""
    shape, dtype = example.shape, example.dtype
    if dtype.is_floating_point or dtype.is_complex:
        out = torch.randn(shape, generator=generator, dtype=torch.float32)
    elif dtype == torch.bool:
        out = torch.rand(shape, generator=generator) < 0.5
    else:
        lo, hi = (int(example.min()), int(example.max())) if example.numel() else (0, 1)
        out = torch.randint(lo, hi + 1, shape, generator=generator, dtype=torch.int64)
    return out.to(dtype=dtype, device=example.device)


DEFAULT_INT_RANGE = (0, 8)
"""[low, high) of random integer inputs where nothing says more: ONNX cannot tell an Embedding's size (or how long a
sequence an index may point into), so the default is small enough for nearly every model; set the range a model
accepts (``value_range``, CLI ``--input-range ids:0,30000``) to exercise it fully."""


def random_input(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str, generator: torch.Generator,
                 value_range: tuple[float, float] | None = None) -> torch.Tensor:
    """A random input of ``dtype``: integers uniform in [low, high) (default ``DEFAULT_INT_RANGE``), random bools,
    floats ~ N(0, 1) or, with ``value_range``, uniform in [low, high]."""
    if dtype == torch.bool:
        return (torch.rand(shape, generator=generator) < 0.5).to(device)
    if dtype.is_floating_point:
        if value_range is None:
            return torch.randn(shape, generator=generator).to(dtype=dtype, device=device)
        low, high = value_range
        return (low + (high - low) * torch.rand(shape, generator=generator)).to(dtype=dtype, device=device)
    low, high = (int(v) for v in value_range or DEFAULT_INT_RANGE)
    return torch.randint(low, high, shape, generator=generator, dtype=torch.int64).to(dtype=dtype, device=device)


def _trial_inputs(examples: tuple[torch.Tensor, ...], trials: int, seed: int) -> list[tuple[torch.Tensor, ...]]:
    sets = [examples]
    for trial in range(1, trials):
        generator = torch.Generator().manual_seed(seed + trial)
        sets.append(tuple(random_like(t, generator) for t in examples))
    return sets


def _examples_from(model: Any, compiled: Any, seed: int) -> tuple[torch.Tensor, ...]:
    for source in (compiled, model):
        specs = input_specs_of(source)
        if specs is not None:
            device = preferred_device(compiled) or preferred_device(model) or torch.device("cpu")
            generator = torch.Generator().manual_seed(seed)
            return tuple(random_input(shape, dtype, device, generator) for shape, dtype in specs)
    raise InvalidInputError(failure("validate(inputs=None) cannot tell the input shapes: neither the reference nor "
                                    "the candidate is an ONNX model or an engine", "example inputs",
                                    "pass inputs=(x,) with one tensor per model input"))


# --------------------------------------------------------------------------------------------------- outputs
def flatten_outputs(outputs: Any) -> list[tuple[str, torch.Tensor]]:
    """(name, tensor) per leaf, named by ``export.output_names`` (the exporter's rule: 'output', 'a.0', 'b.c')."""
    return list(zip(output_names(outputs), torch.utils._pytree.tree_leaves(outputs)))


def default_tolerance(precision: str) -> tuple[float, float]:
    """(atol, rtol) for a precision name; see TOLERANCES."""
    if precision not in TOLERANCES:
        raise InvalidInputError(failure(f"precision={precision!r} is unknown", f"one of {PRECISIONS}",
                                        "pass precision='fp32', 'fp16' or 'bf16', or atol=/rtol= explicitly"))
    return TOLERANCES[precision]


def _precision_of(compiled: Any, pairs: list[tuple[torch.Tensor, Any]], inputs: tuple[torch.Tensor, ...]) -> str:
    for holder in (compiled, getattr(compiled, "engine", None)):
        value = getattr(holder, "precision", None)
        if value in PRECISIONS:
            return str(value)
        metadata = getattr(holder, "metadata", None)
        asked = getattr(getattr(metadata, "options", None), "precision", None)  # BuildOptions.precision
        if asked in PRECISIONS:
            return str(asked)
    tensors = [t for pair in pairs for t in pair] + list(inputs)  # inputs too: bf16 inputs into an fp32 export
    found = {_DTYPE_PRECISION.get(t.dtype) for t in tensors if isinstance(t, torch.Tensor)}
    return "bf16" if "bf16" in found else "fp16" if "fp16" in found else "fp32"


@dataclasses.dataclass
class _Worst:
    """Running worst case over trials for one output."""

    max_abs: float = 0.0
    max_rel: float = 0.0
    cosine: float = 1.0
    min_atol: float = 0.0
    reason: str = ""
    got_shape: tuple[int, ...] | None = None
    got_dtype: str | None = None


def _compare(ref: torch.Tensor, got: Any, atol: float, rtol: float, worst: _Worst) -> None:
    if not isinstance(got, torch.Tensor):
        worst.reason = worst.reason or f"candidate returned a {type(got).__name__}, not a tensor"
        return
    worst.got_shape, worst.got_dtype = tuple(got.shape), str(got.dtype).replace("torch.", "")
    if tuple(got.shape) != tuple(ref.shape):
        worst.reason = worst.reason or f"shape {list(got.shape)} != reference {list(ref.shape)}"
        return
    exact = not (ref.dtype.is_floating_point or ref.dtype.is_complex)
    r, g = ref.detach().cpu().double(), got.detach().cpu().double()
    r_bad, g_bad = ~torch.isfinite(r), ~torch.isfinite(g)
    if r_bad.any() or g_bad.any():
        # NaN == NaN and inf == inf here: the same non-finite value at the same place is a match
        differ = (r_bad | g_bad) & ~torch.isclose(r, g, rtol=0.0, atol=0.0, equal_nan=True)
        if differ.any():
            nan = int(torch.isnan(g).sum()) - int(torch.isnan(r).sum())
            first = tuple(int(i) for i in differ.nonzero()[0])
            what = f"{nan} more NaN than the reference" if nan > 0 else "non-finite values differ from the reference"
            worst.reason = worst.reason or f"{what} (first at index {first})"
        r, g = r.masked_fill(r_bad, 0.0), g.masked_fill(g_bad, 0.0)
    diff = (g - r).abs()
    if diff.numel() == 0:
        return
    nonzero = r != 0
    max_rel = float((diff[nonzero] / r[nonzero].abs()).max()) if nonzero.any() else 0.0
    denom = float(r.norm() * g.norm())
    cosine = float((r.flatten() @ g.flatten()) / denom) if denom > 0 else (1.0 if float(diff.max()) == 0 else 0.0)
    need = float((diff - (0.0 if exact else rtol) * r.abs()).clamp_min(0).max())
    worst.max_abs = max(worst.max_abs, float(diff.max()))
    worst.max_rel = max(worst.max_rel, max_rel)
    worst.cosine = min(worst.cosine, cosine)
    worst.min_atol = max(worst.min_atol, need)
    limit = 0.0 if exact else atol
    if need > limit and not worst.reason:
        worst.reason = f"max abs diff {worst.max_abs:.3g} > atol {limit:g}" + (f" + rtol {rtol:g}*|ref|" if rtol and
                                                                               not exact else "")


def _run(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...]) -> Any:
    """Run on copies of the inputs (an in-place model cannot change what the other one sees), placed where ``fn``
    wants them (the GPU for an engine, a module's parameter device)."""
    device = preferred_device(fn)
    with torch.no_grad():
        return fn(*(t.to(device, copy=True) if device is not None else t.clone() for t in inputs))


# ------------------------------------------------------------------------------------------------ validate()
def validate(model: Any, compiled: Any, inputs: Any = None, *, trials: int = 3, atol: float | None = None,
             rtol: float | None = None, precision: str | None = None, seed: int = 0) -> ValidationReport:
    """Compare ``compiled`` with the reference ``model`` on the same inputs; return a report (it does not raise on
    a mismatch: call ``.check()`` for that).

    Args:
        model: the reference: a callable on tensors (the PyTorch model), or an ONNX model / .onnx path.
        compiled: the candidate: a TRTModule, an ONNX model / .onnx path (run by onnxruntime), or any callable.
        inputs: a tensor or tuple of tensors used by trial 0 and as the template of later trials' random inputs;
            None derives shapes from an ONNX or engine candidate (or reference). Default: None.
        trials: number of input sets (>= 1). Default: 3.
        atol: absolute tolerance. Default: None (by precision, see ``TOLERANCES``: fp32 1e-4, fp16 1e-2, bf16 5e-2).
        rtol: relative tolerance, scaled by ``|ref|`` per element. Default: None (by precision: fp32 1e-3,
            fp16 5e-3, bf16 2e-2).
        precision: "fp32", "fp16" or "bf16", choosing the default tolerances. Default: None (the candidate's build
            precision where known, else the lowest precision among the inputs and outputs).
        seed: seed of the random inputs. Default: 0.

    Raises:
        InvalidInputError: bad arguments, or inputs=None with nothing that declares input shapes.
        MissingDependencyError: an ONNX model is given and onnxruntime is not installed.
    """
    if not isinstance(trials, int) or trials < 1:
        raise InvalidInputError(failure(f"trials={trials!r}", "an int >= 1", "pass trials=3"))
    for label, value in (("atol", atol), ("rtol", rtol)):
        if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
            raise InvalidInputError(failure(f"{label}={value!r}", "a finite number >= 0", f"pass {label}=1e-3"))
    if precision is not None:
        default_tolerance(precision)
    reference, candidate = as_callable(model), as_callable(compiled)
    examples = _as_tuple(inputs) if inputs is not None else _examples_from(reference, candidate, seed)
    names = (describe(model if not isinstance(reference, OnnxRuntimeModule) else reference),
             describe(compiled if not isinstance(candidate, OnnxRuntimeModule) else candidate))

    runs: list[tuple[list[tuple[str, torch.Tensor]], Any]] = []
    error = ""
    for trial_inputs in _trial_inputs(examples, trials, seed):
        ref_out = flatten_outputs(_run(reference, trial_inputs))
        try:
            got_out = _run(candidate, trial_inputs)
        except TorchTRTExtError:
            raise
        except Exception as exc:  # noqa: BLE001 - reported: a candidate that raises fails validation
            error = f"candidate raised {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
            runs.append((ref_out, None))
            break
        got_leaves = [t for _, t in flatten_outputs(got_out)]
        if len(got_leaves) != len(ref_out):
            error = (f"candidate returned {len(got_leaves)} output(s), the reference {len(ref_out)} "
                     f"({[n for n, _ in ref_out]})")
        runs.append((ref_out, got_leaves))

    first_ref = runs[0][0]
    pairs = [(r, g) for ref_out, got in runs if got for (_, r), g in zip(ref_out, got)]
    precision = precision or _precision_of(compiled if not isinstance(candidate, OnnxRuntimeModule) else candidate,
                                           pairs, examples)
    d_atol, d_rtol = default_tolerance(precision)
    atol = d_atol if atol is None else float(atol)
    rtol = d_rtol if rtol is None else float(rtol)

    results = []
    for index, (name, ref0) in enumerate(first_ref):
        worst = _Worst()
        compared = False
        for ref_out, got in runs:
            if got is None or index >= len(got):
                continue
            compared = True
            _compare(ref_out[index][1], got[index], atol, rtol, worst)
        exact = not (ref0.dtype.is_floating_point or ref0.dtype.is_complex)
        if not compared:
            worst.reason = "not produced by the candidate"
        measured = compared and worst.got_shape == tuple(ref0.shape)
        results.append(OutputComparison(
            name=name, ref_shape=tuple(ref0.shape), got_shape=worst.got_shape,
            ref_dtype=str(ref0.dtype).replace("torch.", ""), got_dtype=worst.got_dtype,
            atol=0.0 if exact else atol, rtol=0.0 if exact else rtol, passed=not worst.reason, reason=worst.reason,
            max_abs_diff=worst.max_abs if measured else None, max_rel_diff=worst.max_rel if measured else None,
            cosine=worst.cosine if measured else None, min_atol=worst.min_atol if measured else None))
    return ValidationReport(outputs=tuple(results), precision=precision, atol=atol, rtol=rtol, trials=len(runs),
                            reference=names[0], candidate=names[1], error=error)

