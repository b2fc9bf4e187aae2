"""torch -> ONNX with torchtrt_ext custom ops as custom nodes, through either PyTorch exporter.

``exporter="auto"`` uses the dynamo exporter (``torch.export``-based, PyTorch's default since 2.9 and the one
that will stay) and, if it fails on this model, logs why in one line and retries with the legacy TorchScript exporter.
The exporters' own output (FX graphs, tracer and C++ warnings) is captured and logged at DEBUG (the CLI's
``--verbose``). The exporter used is stored in the model's metadata (``torchtrt_ext.exporter``). Each custom op type
the model uses gets its decomposition as one ONNX model-local function (``passes.functions.add_functions``), so the one
file runs on any ONNX runtime and still takes the plugin where one is loaded.

A model that runs a user's ``torch.autograd.Function`` with a ``symbolic`` (a team's existing custom op, whose
``symbolic`` emits its plugin's node) is exported by the legacy exporter, the only one that calls ``symbolic``: the
dynamo exporter traces ``forward`` instead and would drop the node. ``"auto"`` says so in one line;
``exporter="dynamo"`` refuses such a model, naming the Functions (docs/byo-op.md).
"""
from __future__ import annotations

import contextlib
import inspect
import io
import json
import logging
import os
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import onnx
import torch

from torchtrt_ext._files import save_onnx
from torchtrt_ext.errors import ExportError, InvalidInputError, failure
from torchtrt_ext.ops._torch_op import custom_translation_table
from torchtrt_ext.ops.spec import DOMAIN, DOMAIN_VERSION
from torchtrt_ext.passes.onnx_util import OUTPUT_TREE_KEY
from torchtrt_ext.passes.functions import add_functions
from torchtrt_ext.passes.shapes import infer_shapes, too_big, weightless

log = logging.getLogger("torchtrt_ext")

EXPORTERS = ("auto", "dynamo", "legacy")
LEGACY_OPSETS = range(17, 21)  # the TorchScript exporter's supported range
DYNAMO_OPSETS = range(18, 24)
DEFAULT_OPSET = 18
DynamicShapes = Mapping[str, Mapping[int, str]]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PROTOBUF_LIMIT = re.compile(r"2\s*Gi?B|protobuf", re.IGNORECASE)
_CAUSE = re.compile(r"data-dependent|control flow|not supported|unsupported|cannot|could not", re.IGNORECASE)
#: torch.export's pointer into the model's code: 'The following call raised this error:\n  File "m.py", line 8, ...'
_RAISED_AT = re.compile(r'raised this error:\s*File "(?P<file>[^"]+)", line (?P<line>\d+)[^\n]*\n(?P<code>[^\n]+)')


def input_names(model: torch.nn.Module, example_inputs: Sequence[Any]) -> list[str]:
    """Bind the example inputs to ``model.forward`` and return one name per input (the parameter names)."""
    try:
        bound = inspect.signature(model.forward).bind(*example_inputs)
    except TypeError as exc:
        params = list(inspect.signature(model.forward).parameters)
        raise InvalidInputError(
            f"example_inputs do not match {type(model).__name__}.forward{tuple(params)}: {exc}",
            remedy="pass one tensor per forward argument, as a tuple, e.g. (x,)") from None
    names: list[str] = []
    for name, value in bound.arguments.items():
        kind = inspect.signature(model.forward).parameters[name].kind
        values = value if kind == inspect.Parameter.VAR_POSITIONAL else (value,)
        for i, v in enumerate(values):
            label = f"{name}_{i}" if kind == inspect.Parameter.VAR_POSITIONAL else name
            if not isinstance(v, torch.Tensor):
                raise InvalidInputError(f"example input {label!r} is a {type(v).__name__}, not a torch.Tensor",
                                        remedy="pass tensors only; make other arguments attributes of the model")
            names.append(label)
    return names


def output_names(outputs: Any) -> list[str]:
    """One name per output tensor, in pytree order (the order of the ONNX outputs).

    The one naming rule of export, ``validate``, the engine metadata, ``TRTModule`` and the Triton config: "output"
    for a lone tensor; otherwise the path to the tensor, dict keys and sequence indices joined by ".", the items of a
    returned tuple or list being "output_<i>": ``{"a": (t, t), "b": {"c": t}}`` -> a.0, a.1, b.c; ``(t, {"k": t})``
    -> output_0, output_1.k. Two paths that join alike (``{"a.b": t, "a": {"b": t}}``) keep the name for the first
    and give the later one the first "_<n>" suffix no path has: a.b, a.b_1.
    """
    if isinstance(outputs, torch.Tensor):
        return ["output"]
    paths = []
    for path, _ in torch.utils._pytree.tree_flatten_with_path(outputs)[0]:
        parts = [str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in path]
        if path and isinstance(path[0], torch.utils._pytree.SequenceKey):
            parts[0] = f"output_{parts[0]}"
        paths.append(".".join(parts) or "output")
    taken = set(paths)
    names: list[str] = []
    for name in paths:
        unique, n = name, 0
        while unique in names or (n and unique in taken):
            n += 1
            unique = f"{name}_{n}"
        names.append(unique)
    return names


def output_tree(outputs: Any) -> dict[str, Any]:
    """Describe the structure of a model's outputs; leaves are numbered in export order (pytree order). Dict keys keep
    their type where JSON has it (str, int, float, bool), so ``{3: t}`` comes back keyed by 3; other keys as str."""
    counter = iter(range(1 << 30))

    def walk(obj: Any) -> dict[str, Any]:
        if isinstance(obj, torch.Tensor):
            return {"type": "tensor", "index": next(counter)}
        if isinstance(obj, Mapping):
            return {"type": "dict", "keys": [k if isinstance(k, (str, int, float)) else str(k) for k in obj],
                    "items": [walk(v) for v in obj.values()]}
        if isinstance(obj, (tuple, list)):
            return {"type": "list" if isinstance(obj, list) else "tuple", "items": [walk(v) for v in obj]}
        raise InvalidInputError(failure(f"the model returned a {type(obj).__name__}",
                                        "tensors, or tuples/lists/dicts of tensors",
                                        "return only tensors from forward (keep other values out of the model)"))
    return walk(outputs)


def _check_args(exporter: str, opset: int | None, dynamic: DynamicShapes, names: list[str],
                inputs: Sequence[torch.Tensor]) -> None:
    if exporter not in EXPORTERS:
        raise InvalidInputError(f"exporter={exporter!r} is not one of {EXPORTERS}")
    allowed = {"legacy": LEGACY_OPSETS, "dynamo": DYNAMO_OPSETS, "auto": DYNAMO_OPSETS}[exporter]
    if opset is not None and opset not in allowed:
        raise InvalidInputError(f"opset={opset} is not supported by the {exporter} exporter. "
                                f"Allowed: {allowed.start} to {allowed.stop - 1}")
    for name, dims in dynamic.items():
        if name not in names:
            raise InvalidInputError(f"dynamic_shapes names input {name!r}, but the inputs are {names}")
        rank = inputs[names.index(name)].dim()
        bad = [d for d in dims if not 0 <= d < rank]
        if bad:
            raise InvalidInputError(f"dynamic_shapes[{name!r}] has dims {bad} outside 0..{rank - 1} "
                                    f"(input {name!r} has rank {rank})")


def _default_dynamic(names: list[str], inputs: Sequence[torch.Tensor]) -> dict[str, dict[int, str]]:
    return {n: {0: "batch"} for n, t in zip(names, inputs) if t.dim() > 0}


def _export_dynamo(model: torch.nn.Module, inputs: tuple, names: list[str], outs: list[str],
                   dynamic: DynamicShapes, opset: int) -> onnx.ModelProto:
    dims: dict[str, torch.export.Dim] = {}
    shapes = {}
    for name in names:
        spec = dynamic.get(name, {})
        shapes[name] = {d: dims.setdefault(sym, torch.export.Dim(sym)) for d, sym in spec.items()} or None
    params = list(inspect.signature(model.forward).parameters)
    dynamic_shapes = {p: shapes[p] for p in params if p in shapes} if set(names) <= set(params) else \
        tuple(shapes[n] for n in names)
    registration_log = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registration_log.level
    registration_log.setLevel(logging.ERROR)  # "torchvision is not installed. Skipping ..." is noise here
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore", FutureWarning)
            program = torch.onnx.export(model, inputs, dynamo=True, opset_version=opset, input_names=names,
                                        output_names=outs, dynamic_shapes=dynamic_shapes or None,
                                        custom_translation_table=custom_translation_table(), verbose=False)
    finally:
        registration_log.setLevel(level)
    if program is None:
        raise ExportError("torch.onnx.export(dynamo=True) returned no program")
    return program.model_proto


def _export_legacy(model: torch.nn.Module, inputs: tuple, names: list[str], outs: list[str],
                   dynamic: DynamicShapes, opset: int) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(model, inputs, buffer, dynamo=False, opset_version=opset, input_names=names,
                          output_names=outs, dynamic_axes={k: dict(v) for k, v in dynamic.items()})
    return onnx.load_from_string(buffer.getvalue())


def export_onnx(model: torch.nn.Module, example_inputs: Any, path: str | os.PathLike | None = None, *,
                dynamic_shapes: DynamicShapes | None = None, exporter: str = "auto",
                opset: int | None = None, functions: bool = True) -> onnx.ModelProto:
    """Export ``model`` to ONNX with custom ops as torchtrt_ext nodes; write it to ``path`` when given.

    ``dynamic_shapes`` maps input names to ``{dim: symbol}`` (default None: dim 0 of every input is "batch";
    ``{}``: all static). ``exporter``: "auto" (dynamo, falling back to legacy), "dynamo" or "legacy".
    ``opset``: default 18. ``functions``: store each custom op's decomposition as a model-local function, once per
    op type (default True; False writes the custom nodes alone).
    """
    if not isinstance(model, torch.nn.Module):
        raise InvalidInputError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(example_inputs, (torch.Tensor, Sequence)) or isinstance(example_inputs, (str, bytes)):
        raise InvalidInputError(failure(f"example_inputs is a {type(example_inputs).__name__}",
                                        "a tensor or a tuple of tensors, one per forward argument",
                                        "pass example inputs like (torch.randn(1, 3, 224, 224),)"))
    inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    names = input_names(model, inputs)
    dynamic = _default_dynamic(names, inputs) if dynamic_shapes is None else dynamic_shapes
    _check_args(exporter, opset, dynamic, names, inputs)
    opset = opset or DEFAULT_OPSET
    with torch.no_grad(), _functions_with_symbolic() as symbolic_functions:
        eager = model(*inputs)
    _check_tensor_outputs(model, eager)
    outs, tree = output_names(eager), output_tree(eager)
    order = _exporters_for(exporter, symbolic_functions, opset)
    errors = []
    for which in order:
        if which == "legacy" and opset not in LEGACY_OPSETS:
            errors.append(f"legacy: opset {opset} is outside {LEGACY_OPSETS.start}..{LEGACY_OPSETS.stop - 1}")
            continue
        try:
            run = _export_dynamo if which == "dynamo" else _export_legacy
            with _exporter_output(which):
                onnx_model = run(model, inputs, names, outs, dynamic, opset)
            break
        except Exception as exc:  # noqa: BLE001 - reported below with every exporter's reason
            errors.append(f"{which} exporter: {_exporter_failure(exc)}")
    else:
        raise ExportError(failure(f"ONNX export failed ({'; '.join(errors)})", "a model torch.export or the "
                                  "TorchScript tracer can capture on the example inputs", _export_remedy(order, errors)))
    if errors and which == "legacy":
        log.warning("%s; exported with the legacy TorchScript exporter instead, which records the path the example "
                    "inputs took: data-dependent control flow (an 'if' or loop on tensor values) is fixed to that "
                    "branch", errors[0])
    onnx_model = _finish(onnx_model, which, tree, functions)
    if path is not None:
        save_onnx(onnx_model, path)
    return onnx_model


def _export_remedy(tried: Sequence[str], errors: Sequence[str]) -> str:
    """What to do after every exporter in ``tried`` failed: never the exporter that just failed; for a model over
    protobuf's 2 GiB limit, the exporter that writes its weights as external data."""
    if any(e.startswith("legacy") and _PROTOBUF_LIMIT.search(e) for e in errors):
        return ("the legacy exporter holds the whole model in one protobuf message, which cannot pass 2 GiB: export "
                "with exporter='dynamo' (it writes the weights as external data), or make the model smaller")
    others = [f"exporter={e!r}" for e in EXPORTERS[1:] if e not in tried]
    return ("check the model runs on the example inputs; " + (f"try {' or '.join(others)}, or " if others else "try ")
            + "static shapes (dynamic_shapes={})")


_ORIGINAL_APPLY = torch.autograd.Function.__dict__["apply"]
_RECORD_LOCK = threading.Lock()
_RECORDING = threading.local()  # .seen: the list of the thread's open _functions_with_symbolic
_recorders = 0  # open _functions_with_symbolic, all threads


def _recording_apply(cls: type[torch.autograd.Function], *args: Any, **kwargs: Any) -> Any:
    seen = getattr(_RECORDING, "seen", None)
    if seen is not None and cls not in seen and _own_symbolic(cls):
        seen.append(cls)
    return _ORIGINAL_APPLY.__func__(cls, *args, **kwargs)


@contextlib.contextmanager
def _functions_with_symbolic() -> Iterator[list[type[torch.autograd.Function]]]:
    """Meanwhile, record each ``torch.autograd.Function`` subclass with a ``symbolic`` of its own whose ``apply`` runs
    in this thread (in call order, once each). ``Function.apply`` is a classmethod every subclass inherits, so wrapping
    it sees them all; the wrapper is installed while any thread records and the original put back after the last."""
    global _recorders
    seen: list[type[torch.autograd.Function]] = []
    with _RECORD_LOCK:
        if _recorders == 0:
            torch.autograd.Function.apply = classmethod(_recording_apply)  # type: ignore[assignment,method-assign]
        _recorders += 1
    _RECORDING.seen = seen
    try:
        yield seen
    finally:
        del _RECORDING.seen
        with _RECORD_LOCK:
            _recorders -= 1
            if _recorders == 0:
                torch.autograd.Function.apply = _ORIGINAL_APPLY  # type: ignore[method-assign]


def _own_symbolic(cls: type) -> bool:
    """Whether ``cls`` (or a base below ``torch.autograd.Function``) defines ``symbolic``."""
    return any("symbolic" in vars(base) for base in cls.__mro__ if issubclass(base, torch.autograd.Function)
               and base is not torch.autograd.Function)


def _exporters_for(exporter: str, functions: Sequence[type], opset: int) -> list[str]:
    """The exporters to try, in order: for a model running Functions with a ``symbolic``, the legacy one only (said in
    one line under "auto"; refused under "dynamo", which would drop their nodes, and for an opset it lacks)."""
    if not functions:
        return ["dynamo", "legacy"] if exporter == "auto" else [exporter]
    named = ", ".join(f"{f.__module__}.{f.__qualname__}" for f in functions)
    if exporter == "auto" and opset not in LEGACY_OPSETS:
        raise ExportError(failure(
            f"opset {opset} cannot keep the custom nodes of {named}: only the legacy exporter calls symbolic, and it "
            f"writes opsets {LEGACY_OPSETS.start} to {LEGACY_OPSETS.stop - 1}", "an opset the legacy exporter writes",
            f"pass opset={LEGACY_OPSETS.stop - 1} or lower, or define the op with torchtrt_ext.define_op "
            "(docs/byo-op.md)"))
    if exporter == "dynamo":
        raise ExportError(failure(
            f"exporter='dynamo' cannot keep the custom nodes of {named}: the dynamo exporter traces "
            "autograd.Function.forward and never calls its symbolic", "a model without autograd.Function.symbolic "
            "for the dynamo exporter", "pass exporter='auto' or 'legacy' (both keep the nodes), or define the op with "
            "torchtrt_ext.define_op (docs/byo-op.md)"))
    if exporter == "auto":
        log.warning("exporting with the legacy TorchScript exporter: %s define(s) symbolic, which only it calls "
                    "(the dynamo exporter would drop the node)", named)
    return ["legacy"]


def _check_tensor_outputs(model: torch.nn.Module, outputs: Any) -> None:
    """ONNX outputs are tensors: name the first output that is not one (both exporters fail on it, unhelpfully)."""
    for name, leaf in zip(output_names(outputs), torch.utils._pytree.tree_leaves(outputs)):
        if not isinstance(leaf, torch.Tensor):
            raise ExportError(failure(
                f"output {name!r} of {type(model).__name__} is {_a(type(leaf).__name__)} ({str(leaf)[:40]}), "
                "not a tensor", "tensors, or dicts, tuples and lists of tensors (ONNX outputs are tensors)",
                "return it as a tensor (torch.tensor(...)), or drop it from forward's outputs"))


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


@contextlib.contextmanager
def _exporter_output(which: str) -> Iterator[None]:
    """Capture what an exporter prints (Python warnings, torch's log handlers, C++ on file descriptors 1 and 2) and
    log it at DEBUG: the user reads our one-line reason, ``--verbose`` shows the rest. Other threads' output to the
    terminal is captured too while an exporter runs."""
    sys.stdout.flush()
    sys.stderr.flush()
    text = io.StringIO()
    # torch's own handlers hold the stream they were made with (one handler shared by many torch.* loggers)
    handlers = list({id(h): h for name, lg in logging.root.manager.loggerDict.items() if name.split(".")[0] == "torch"
                     and isinstance(lg, logging.Logger) for h in lg.handlers if isinstance(h, logging.StreamHandler)
                     and not isinstance(h, logging.FileHandler) and h.stream is not None}.values())
    streams = [h.setStream(text) for h in handlers]
    torch_log = logging.getLogger("torch")
    propagate, torch_log.propagate = torch_log.propagate, False  # not through the application's root handlers either
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as native:
        try:
            os.dup2(native.fileno(), 1)
            os.dup2(native.fileno(), 2)
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text), warnings.catch_warnings():
                warnings.simplefilter("always")  # shown (into ``text``) once per export, not once per process
                yield
        finally:
            for fd, original in zip((1, 2), saved):
                os.dup2(original, fd)
                os.close(original)
            for handler, stream in zip(handlers, streams):
                handler.setStream(stream)
            torch_log.propagate = propagate
            native.seek(0)
            captured = text.getvalue() + native.read().decode(errors="replace")
            if captured.strip():
                log.debug("%s exporter output:\n%s", which, _ANSI.sub("", captured).rstrip())


def _exporter_failure(exc: BaseException) -> str:
    """One clean line saying why an exporter rejected a model: no ANSI colours, no stack: the innermost cause's own
    line ("Could not guard on data-dependent expression ...", where torch.export's wrapper says only "Failed to
    export the model ... Next steps") and, where torch names it, the line of the model's code that raised."""
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 10:
        chain.append(chain[-1].__cause__)
    root = chain[-1]
    lines = [line.strip() for line in _ANSI.sub("", str(root)).splitlines() if line.strip()]
    cause = next((line for line in lines if _CAUSE.search(line)), lines[0] if lines else "")
    where = ""
    for error in chain:
        found = _RAISED_AT.search(_ANSI.sub("", str(error)))
        if found:
            code = found["code"].split("  #")[0].strip()  # the statement, not its comment
            where = f" at {os.path.basename(found['file'])}:{found['line']} `{code}`"
            break
    return f"{type(root).__name__}: {cause[:300]}".rstrip(": ") + where


def _finish(model: onnx.ModelProto, exporter: str, tree: dict[str, Any], functions: bool) -> onnx.ModelProto:
    """Ensure the custom opset import, fill shapes through custom nodes, add the ops' functions, tag the exporter and
    the output tree (a build from the file returns what the model did), check the model."""
    uses_custom = any(n.domain == DOMAIN for n in model.graph.node)
    domains = {e.domain for e in model.opset_import}
    if uses_custom and DOMAIN not in domains:
        model.opset_import.append(onnx.helper.make_opsetid(DOMAIN, DOMAIN_VERSION))
    model = infer_shapes(model)
    if functions:
        add_functions(model)
    onnx.helper.set_model_props(model, {**{p.key: p.value for p in model.metadata_props},
                                        "torchtrt_ext.exporter": exporter,
                                        OUTPUT_TREE_KEY: json.dumps(tree, sort_keys=True, separators=(",", ":"))})
    onnx.checker.check_model(weightless(model) if too_big(model) else model)
    return model
