"""The ``torchtrt-ext`` command: export, build, inspect, validate and bench from a shell.

    torchtrt-ext export  mypkg.models:make_detector --input-shape x:1x3x640x640 -o det.onnx
    torchtrt-ext inspect det.onnx                      # the doctor report (what TensorRT will make of the graph)
    torchtrt-ext build   det.onnx -o det.engine --precision fp16 --min-shapes x:1x3x640x640 \\
                         --opt-shapes x:8x3x640x640 --max-shapes x:16x3x640x640
    torchtrt-ext inspect det.engine                    # the engine's metadata (target GPU, TensorRT, profiles)
    torchtrt-ext validate mypkg.models:make_detector det.onnx      # PyTorch vs the export on onnxruntime (CPU)
    torchtrt-ext validate mypkg.models:make_detector det.engine    # PyTorch vs the engine (needs a GPU runtime)
    torchtrt-ext bench   mypkg.models:make_detector det.onnx det.engine --torch-compile --input-shape x:8x3x640x640

A model spec is ``package.module:factory`` or ``path/to/file.py:factory``: ``factory`` is an ``nn.Module`` class or a
function returning a module (called with no arguments), or a module instance. The current directory is importable.

Shapes are written ``name:1x3x224x224``, several separated by commas (trtexec's spelling); ``--input-shape`` also
accepts a bare ``1x3x224x224`` for the inputs in order. Every subcommand takes ``--json`` (one JSON document on
stdout) and ``--help``. Errors are one line on stderr ending with the remedy (TensorRT's own messages are mapped to
the remedies of DESIGN.md §7 by ``TRT_MESSAGE_REMEDIES``).

Exit codes:
    0  success
    1  validation failed (an output out of tolerance) or a benchmark candidate failed
    2  usage or bad input: bad arguments, a missing or unreadable file, a bad shape string, an unknown precision, an
       engine that carries host code run without --allow-engine-host-code
    3  a missing dependency or runtime: TensorRT / onnxruntime not installed, no GPU to run an engine, an engine
       built for another GPU or TensorRT version
    4  export or engine build failed (the message says why, TensorRT's errors included)
    5  an unexpected internal error (rerun with --verbose for the traceback)
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import importlib
import importlib.util
import json
import logging
import os
import re
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from torchtrt_ext import __version__
from torchtrt_ext._files import same_file, save_onnx
from torchtrt_ext._progress import ticking
from torchtrt_ext.backend.adapter import BACKENDS
from torchtrt_ext.backend.engine import is_engine_file
from torchtrt_ext.backend.plugins import PLUGIN_MODES, recorded_ops
from torchtrt_ext.passes.precision import PRECISIONS
from torchtrt_ext.doctor import report as doctor
from torchtrt_ext.compile import run_passes
from torchtrt_ext.passes.onnx_util import read_onnx
from torchtrt_ext.runtime import TRTModule
from torchtrt_ext.validate import PRECISIONS as TOLERANCE_PRECISIONS

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MISSING, EXIT_BUILD, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5
PROG = "torchtrt-ext"
DTYPES = ("float32", "float16", "bfloat16")

EPILOG = """exit codes: 0 ok; 1 validation failed or a benchmark candidate failed; 2 usage or bad input (bad arguments,
missing file, bad shape string, unknown precision, an engine with host code and no --allow-engine-host-code); 3 missing dependency or runtime (TensorRT, onnxruntime, a GPU,
an engine built for another GPU/TensorRT); 4 export or build failed; 5 internal error (rerun with --verbose).
Errors are printed as one line ending with the remedy."""

#: TensorRT (and ONNX parser) message patterns -> the remedy of DESIGN.md §7. Checked in order, first match wins,
#: so the more specific patterns come first (a missing plugin also says "No importer registered for op").
TRT_MESSAGE_REMEDIES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), r) for p, r in (
    (r"plugin (creator )?not found|could not find (the )?plugin|getPluginCreator|creator .{0,60}not (be )?found"
     r"|fail(ed)? to load (the )?(plugin )?library|plugin library .{0,40}(not found|fail)",
     "load the plugin library (--plugins cpp, after building libtorchtrt_ext_plugins.so) and check the node's "
     "op_type, plugin_version and plugin_namespace; or --plugins decompose"),
    (r"no importer registered for op|unsupported_node|unsupported onnx (node|op)|unsupported operator",
     "map the op to supported ONNX ops at export, decompose it (--plugins decompose), or provide a plugin"),
    (r"could not find any implementation|no implementation (obeys|found|for)",
     "try --precision fp32, or narrow the dynamic shape range (--min-shapes/--max-shapes)"),
    (r"compute capability .{0,40}not supported|deserializ|serialization (assertion|error)|version tag|magic tag"
     r"|built for (another|a different)|incompatible (engine|plan)",
     "check the plugin's serialized fields; rebuild the engine on the target GPU with this TensorRT version "
     "(torchtrt-ext build)"),
    (r"\bnan\b",
     "a plugin was fed FP16 it does not handle: restrict its formats in supportsFormatCombination, or keep that "
     "part in FP32 (--precision fp32)"),
    (r"slow|fall(ing|s)? back to",
     "narrow the profiles (--min-shapes/--max-shapes) and read the builder warnings"),
))


def remedy_for(message: str) -> str | None:
    """The DESIGN.md §7 remedy for a TensorRT error message, or None when no pattern matches."""
    for pattern, remedy in TRT_MESSAGE_REMEDIES:
        if pattern.search(message):
            return remedy
    return None


class CliError(Exception):
    """A failure the command reports as one line with an exit code; its message is one sentence that ends with
    "Remedy: ..."."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def _collapsed(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip()


def one_line(what: str, remedy: str) -> str:
    """``what`` collapsed to one line, then ``. Remedy: <remedy>``."""
    return f"{_collapsed(what).rstrip(' .')}. Remedy: {remedy}"


def error_line(exc: BaseException, code: int) -> str:
    """The one line a failed command prints for ``exc``, built from the error's fields (what failed, what was
    expected, the remedy), never from its text: where a build or library error quotes a TensorRT message of DESIGN.md
    §7, that message's remedy replaces the error's own; an error without a remedy gets "rerun with --verbose"."""
    from torchtrt_ext.errors import TorchTRTExtError

    if isinstance(exc, CliError):
        return _collapsed(str(exc))  # written as one sentence ending with its remedy
    message = str(exc) or type(exc).__name__
    if code == EXIT_INTERNAL:
        message = f"{type(exc).__name__}: {message}"
    design = remedy_for(message) if code in (EXIT_BUILD, EXIT_MISSING) else None
    if isinstance(exc, TorchTRTExtError) and exc.remedy:
        what = f"{exc.what}. Expected: {exc.expected}" if exc.expected else exc.what
        return one_line(what, design or exc.remedy)
    return one_line(message, design or "rerun with --verbose for the details")


# ------------------------------------------------------------------------------------------------ parsing helpers
def parse_shape(text: str) -> tuple[int, ...]:
    """``"1x3x224x224"`` -> ``(1, 3, 224, 224)``; dims are integers >= 0 separated by 'x'."""
    parts = text.strip().lower().split("x")
    if not text.strip() or not all(p.isdigit() for p in parts):
        raise CliError(f"bad shape {text!r}: expected integers separated by 'x'. Remedy: write it like 1x3x224x224")
    return tuple(int(p) for p in parts)


def parse_named_shapes(text: str, *, allow_unnamed: bool = False) -> dict[str, tuple[int, ...]]:
    """``"x:1x3x64x64,y:1x8"`` -> ``{"x": (1, 3, 64, 64), "y": (1, 8)}`` (unnamed entries get "#0", "#1", ...)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for index, item in enumerate(t for t in text.split(",") if t.strip()):
        name, sep, shape = item.strip().rpartition(":")
        if not sep and not allow_unnamed:
            raise CliError(f"bad shape {item!r}: no input name. Remedy: write name:1x3x224x224 (comma-separated "
                           "for several inputs)")
        shapes[name if sep else f"#{index}"] = parse_shape(shape)
    if not shapes:
        raise CliError(f"bad shape list {text!r}: empty. Remedy: write name:1x3x224x224")
    return shapes


def _shapes_arg(values: Sequence[str] | None, *, allow_unnamed: bool = True) -> dict[str, tuple[int, ...]]:
    merged: dict[str, tuple[int, ...]] = {}
    for value in values or ():
        for name, shape in parse_named_shapes(value, allow_unnamed=allow_unnamed).items():
            merged[name if not name.startswith("#") else f"#{len(merged)}"] = shape
    return merged


def load_model(spec: str) -> Any:
    """Import ``module:factory`` or ``file.py:factory`` and return the model (eval mode), seeding torch first."""
    import torch

    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise CliError(f"bad model spec {spec!r}. Remedy: write package.module:factory or path/to/file.py:factory")
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise CliError(f"model file {path} does not exist. Remedy: check the path in {spec!r}")
            folder = str(path.resolve().parent)
            if folder not in sys.path:  # as `python file.py` does: the file imports the modules beside it
                sys.path.insert(0, folder)
            loader = importlib.util.spec_from_file_location(path.stem, path)
            assert loader is not None and loader.loader is not None
            module = importlib.util.module_from_spec(loader)
            loader.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except CliError:
        raise
    except ImportError as exc:
        if module_name.endswith(".py"):
            raise CliError(f"{module_name} imports what is not installed or not on the path ({exc}). Remedy: install "
                           "it, or add its folder to PYTHONPATH") from None
        raise CliError(f"cannot import {module_name!r} ({exc}). Remedy: run from the folder that holds it or set "
                       "PYTHONPATH; or give path/to/file.py:factory") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise CliError(f"{module_name} has no {attr!r}. Remedy: name a module class, a function returning a module, "
                       "or a module instance")
    torch.manual_seed(0)  # a factory that initializes weights randomly gives the same model in every subcommand
    model = factory if isinstance(factory, torch.nn.Module) else factory() if callable(factory) else factory
    if not isinstance(model, torch.nn.Module):
        raise CliError(f"{spec} gave a {type(model).__name__}, not a torch.nn.Module. Remedy: make the factory "
                       "return the model")
    return model.eval()


def _dtype(name: str) -> Any:
    import torch

    return getattr(torch, name)


def _existing(path_text: str, what: str) -> Path:
    path = Path(path_text)
    if not path.is_file():
        raise CliError(f"{what} {path} does not exist. Remedy: check the path")
    return path


def _custom_nodes(model: Any) -> list[str]:
    """The op types of the model's torchtrt_ext nodes, in graph order."""
    from torchtrt_ext.ops import DOMAIN

    return [n.op_type for n in model.graph.node if n.domain == DOMAIN]


def _spec_file(spec: str) -> str | None:
    """The source file of a model spec's module (after ``load_model`` imported it)."""
    module_name = spec.rpartition(":")[0]
    if module_name.endswith(".py"):
        return module_name
    return getattr(sys.modules.get(module_name), "__file__", None)


def _output_path(text: str, *inputs: str | os.PathLike[str] | None) -> Path:
    """The file a subcommand writes (-o): never one of its inputs, in a folder that exists."""
    path = Path(text)
    for source in inputs:
        if source is not None and same_file(path, source):
            raise CliError(f"-o {text} is this command's input {source}: writing there would destroy it. Remedy: "
                           "give another output path")
    folder = Path(os.path.realpath(path)).parent
    if not folder.is_dir():
        raise CliError(f"-o {text}: the folder {folder} does not exist. Remedy: create it first (mkdir -p {folder}) "
                       "or check the path")
    return path


def _target_kind(text: str) -> str:
    """'onnx', 'engine' or 'model' for a positional target."""
    path = Path(text)
    if text.endswith(".onnx"):
        _existing(text, "ONNX file")
        return "onnx"
    if path.is_file():
        if is_engine_file(path):
            return "engine"
        raise CliError(f"{path} is neither an .onnx file nor a torchtrt_ext engine file. Remedy: pass an .onnx "
                       "file, an engine written by 'torchtrt-ext build', or a model spec module:factory")
    if ":" in text and not text.endswith((".engine", ".plan", ".trt")):
        return "model"
    raise CliError(f"{text} does not exist. Remedy: check the path, or write a model spec as module:factory")


def _check_engine_host_code(targets: Sequence[str], kinds: Sequence[str], allowed: bool) -> None:
    """Refuse engines that carry host code before anything else happens (GPU checks included) unless allowed."""
    from torchtrt_ext.backend import Engine
    from torchtrt_ext.runtime import check_host_code_allowed

    for text, kind in zip(targets, kinds):
        if kind == "engine":
            check_host_code_allowed(Engine.load(text).metadata, allowed, f"engine file {text}")


def _load_engine_module(path: Path, allow_engine_host_code: bool) -> Any:
    import torch

    from torchtrt_ext.backend import Engine
    from torchtrt_ext.errors import MissingDependencyError, failure

    engine = Engine.load(path)
    module = TRTModule(engine, allow_engine_host_code=allow_engine_host_code)
    if not torch.cuda.is_available():
        raise MissingDependencyError(failure(
            f"running the engine {path.name} needs a CUDA GPU, and torch sees none", "a machine with a CUDA GPU and "
            f"the {engine.metadata.backend} runtime", "run it on the target GPU, or validate the ONNX export on "
            "onnxruntime instead (torchtrt-ext validate MODEL model.onnx)"))
    return module


def _examples(shapes: dict[str, tuple[int, ...]], model: Any, dtype: Any, device: Any) -> tuple[Any, ...] | None:
    """Random example inputs from --input-shape (named ones ordered like forward's parameters)."""
    import inspect

    import torch

    if not shapes:
        return None
    named = {k: v for k, v in shapes.items() if not k.startswith("#")}
    if named and isinstance(model, torch.nn.Module):
        params = list(inspect.signature(model.forward).parameters)
        unknown = [n for n in named if n not in params]
        if unknown:
            raise CliError(f"--input-shape names {unknown}, but {type(model).__name__}.forward takes {params}. "
                           "Remedy: use the forward parameter names")
        order = [shapes[p] for p in params if p in named] + [v for k, v in shapes.items() if k.startswith("#")]
    else:
        order = list(shapes.values())
    generator = torch.Generator().manual_seed(0)
    return tuple(torch.randn(s, generator=generator).to(dtype=dtype, device=device) for s in order)


# ------------------------------------------------------------------------------------------------- subcommands
def cmd_export(args: argparse.Namespace) -> tuple[int, Any, str]:
    import torchtrt_ext

    shapes = _shapes_arg(args.input_shape)
    if not shapes:
        raise CliError("export needs --input-shape. Remedy: add --input-shape x:1x3x224x224 (one per input)")
    model = load_model(args.model)
    output = _output_path(args.output, _spec_file(args.model))
    dtype = _dtype(args.dtype)
    model = model.to(dtype=dtype)  # the random inputs are of --dtype, so the weights must be too
    examples = _examples(shapes, model, dtype, "cpu")
    started = time.monotonic()
    with ticking(f"exporting {args.model}", enabled=not args.quiet):
        onnx_model = torchtrt_ext.export_onnx(model, examples, exporter=args.exporter, opset=args.opset,
                                              dynamic_shapes={} if args.static else None,
                                              functions=not args.no_functions)
    onnx_model = run_passes(onnx_model, fuse=not args.no_fuse)
    if not args.no_functions:  # after the fusion, so the L2Norm nodes it made get their function too
        from torchtrt_ext.passes.functions import add_functions
        add_functions(onnx_model)
    save_onnx(onnx_model, output)
    custom = _custom_nodes(onnx_model)
    props = {p.key: p.value for p in onnx_model.metadata_props}
    data = {"output": str(args.output), "exporter": props.get("torchtrt_ext.exporter"),
            "inputs": [i.name for i in onnx_model.graph.input], "outputs": [o.name for o in onnx_model.graph.output],
            "nodes": len(onnx_model.graph.node), "custom_nodes": custom, "seconds": round(time.monotonic() - started, 2)}
    text = (f"wrote {args.output}: {data['nodes']} nodes, custom nodes {custom or 'none'}, inputs {data['inputs']}, "
            f"outputs {data['outputs']} ({data['exporter']} exporter, {data['seconds']} s)")
    return EXIT_OK, data, text


def _profiles(args: argparse.Namespace) -> dict[str, tuple[tuple[int, ...], ...]] | None:
    lo, opt, hi = (parse_named_shapes(v) if v else None for v in (args.min_shapes, args.opt_shapes, args.max_shapes))
    if lo is None and opt is None and hi is None:
        return None
    if opt is not None and lo is None and hi is None:  # trtexec's --shapes: one static profile
        lo = hi = opt
    if lo is None or hi is None:
        raise CliError("--min-shapes and --max-shapes go together (with --opt-shapes, or --opt-shapes alone for a "
                       "static profile). Remedy: give all three, like trtexec")
    opt = opt if opt is not None else hi
    if not set(lo) == set(opt) == set(hi):
        raise CliError(f"the shape flags name different inputs ({sorted(lo)}, {sorted(opt)}, {sorted(hi)}). "
                       "Remedy: name the same inputs in --min-shapes, --opt-shapes and --max-shapes")
    return {name: (lo[name], opt[name], hi[name]) for name in lo}


def cmd_build(args: argparse.Namespace) -> tuple[int, Any, str]:
    onnx_path = _existing(args.onnx, "ONNX file")
    output = _output_path(args.output, onnx_path)
    profiles = _profiles(args)
    model = run_passes(read_onnx(onnx_path), fuse=not args.no_fuse)
    from torchtrt_ext.backend import build_engine

    started = time.monotonic()
    if not args.quiet and not args.json:
        print(f"[torchtrt-ext] building {onnx_path.name} with {args.backend} ({args.precision}, plugins "
              f"{args.plugins}) ...", file=sys.stderr, flush=True)
    kwargs: dict[str, Any] = {"backend": args.backend, "precision": args.precision, "profiles": profiles,
                              "plugins": args.plugins, "progress": not args.quiet}
    if args.workspace is not None:
        kwargs["workspace"] = args.workspace << 20
    if args.timing_cache is not None:
        kwargs["timing_cache"] = args.timing_cache
    engine = build_engine(model, **kwargs)
    engine.save(output)
    meta = engine.metadata
    seconds = round(time.monotonic() - started, 2)
    data = {"output": str(args.output), "bytes": len(engine.plan), "seconds": seconds,
            "custom_nodes": _custom_nodes(model), **meta.to_json()}
    text = (f"wrote {args.output}: {len(engine.plan) / 1e6:.2f} MB, {meta.describe_target()}, precision "
            f"{meta.build.get('precision')}, plugins {meta.plugin_mode}, {len(meta.profiles)} profile(s), {seconds} s")
    return EXIT_OK, data, text


def _engine_table(meta: Any) -> str:
    from torchtrt_ext.validate import format_table

    lines = [f"engine for {meta.describe_target()}",
             f"precision {meta.build.get('precision')}, plugins {meta.plugin_mode} {list(meta.plugins) or ''}".rstrip(),
             f"built by torchtrt_ext {meta.torchtrt_ext_version or '?'}"]
    lines += [f"plugin {op.plugin.id} ({op.plugin.provider}): {op.route}" for op in recorded_ops(meta)]
    if meta.plugins_embedded:
        lines.append("carries host code (embedded plugin library): running it needs --allow-engine-host-code")
    rows = [["input", t.name, t.dtype, "x".join(str(d) for d in t.shape)] for t in meta.inputs]
    rows += [["output", t.name, t.dtype, "x".join(str(d) for d in t.shape)] for t in meta.outputs]
    lines.append(format_table(["io", "name", "dtype", "shape (-1: dynamic)"], rows))
    for index, profile in enumerate(meta.profiles):
        for name, shape_range in profile.items():
            lines.append(f"profile {index}: {name}: {shape_range.describe()}")
    return "\n".join(lines)


def cmd_inspect(args: argparse.Namespace) -> tuple[int, Any, str]:
    path = _existing(args.path, "file")
    if is_engine_file(path):
        from torchtrt_ext.backend import Engine

        meta = Engine.load(path).metadata
        return EXIT_OK, {"kind": "engine", **meta.to_json()}, _engine_table(meta)
    from torchtrt_ext.errors import InvalidInputError

    try:
        model = read_onnx(path)
    except InvalidInputError:
        raise CliError(f"{path} is neither an ONNX model nor a torchtrt_ext engine (empty, truncated or another "
                       "format). Remedy: pass an .onnx file or an engine written by 'torchtrt-ext build'") from None
    result = doctor(model, backend=args.backend)
    return EXIT_OK, {"kind": "onnx", **result.to_dict()}, result.to_table()


def _runnable(text: str, device: Any, dtype: Any, allow_engine_host_code: bool) -> tuple[str, Any]:
    kind = _target_kind(text)
    if kind == "onnx":
        from torchtrt_ext.validate import OnnxRuntimeModule

        return kind, OnnxRuntimeModule(text)
    if kind == "engine":
        return kind, _load_engine_module(Path(text), allow_engine_host_code)
    return kind, load_model(text).to(device=device, dtype=dtype)


def _device(choice: str, kinds: Sequence[str]) -> Any:
    import torch

    from torchtrt_ext.errors import MissingDependencyError

    if "engine" in kinds and not torch.cuda.is_available():
        raise MissingDependencyError(
            "running an engine needs a CUDA GPU, and torch sees none",
            remedy="run it on the target GPU, or compare with the ONNX export on onnxruntime instead (torchtrt-ext "
            "validate MODEL model.onnx)")
    if choice == "auto":
        return torch.device("cuda" if "engine" in kinds or torch.cuda.is_available() else "cpu")
    if choice not in ("cpu", "cuda") and not re.fullmatch(r"cuda:\d+", choice):
        raise CliError(f"--device {choice!r} is not a device. Remedy: use cpu, cuda or cuda:N")
    if choice.startswith("cuda") and not torch.cuda.is_available():
        raise MissingDependencyError(f"--device {choice} but torch sees no CUDA GPU", remedy="use --device cpu")
    return torch.device(choice)


def cmd_validate(args: argparse.Namespace) -> tuple[int, Any, str]:
    from torchtrt_ext.validate import validate

    if args.precision is not None and args.precision not in TOLERANCE_PRECISIONS:
        raise CliError(f"unknown precision {args.precision!r}. Remedy: use fp32, fp16 or bf16")
    shapes = _shapes_arg(args.input_shape)
    kinds = [_target_kind(args.reference), _target_kind(args.candidate)]
    _check_engine_host_code([args.reference, args.candidate], kinds, args.allow_engine_host_code)
    device = _device(args.device, kinds)
    dtype = _dtype(args.dtype)
    _, reference = _runnable(args.reference, device, dtype, args.allow_engine_host_code)
    _, candidate = _runnable(args.candidate, device, dtype, args.allow_engine_host_code)
    examples = _examples(shapes, reference, dtype, device)
    report = validate(reference, candidate, examples, trials=args.trials, atol=args.atol, rtol=args.rtol,
                      precision=args.precision, seed=args.seed)
    report = dataclasses.replace(report, reference=args.reference, candidate=args.candidate)
    return (EXIT_OK if report.passed else EXIT_FAILED), report.to_json(), report.to_table()


def cmd_bench(args: argparse.Namespace) -> tuple[int, Any, str]:
    import torch

    from torchtrt_ext.bench import benchmark
    from torchtrt_ext.validate import input_specs_of

    kinds = [_target_kind(t) for t in args.targets]
    _check_engine_host_code(args.targets, kinds, args.allow_engine_host_code)
    device = _device(args.device, kinds)
    dtype = _dtype(args.dtype)
    candidates: dict[str, Any] = {}
    for text, kind in zip(args.targets, kinds):
        _, runnable = _runnable(text, device, dtype, args.allow_engine_host_code)
        candidates[f"{text} (onnxruntime)" if kind == "onnx" else text] = runnable
        if kind == "model" and args.torch_compile:
            candidates[f"{text} (torch.compile)"] = torch.compile(runnable)
    shapes = _shapes_arg(args.input_shape)
    first_model = next((c for c, k in zip(candidates.values(), kinds) if k == "model"), None)
    examples = _examples(shapes, first_model, dtype, device)
    if examples is None:
        specs = next((s for s in (input_specs_of(c) for c in candidates.values()) if s), None)
        if specs is None:
            raise CliError("bench cannot tell the input shapes. Remedy: add --input-shape x:1x3x224x224")
        generator = torch.Generator().manual_seed(0)
        examples = tuple(torch.randn(s, generator=generator).to(dtype=d if d.is_floating_point else dtype,
                                                                device=device) for s, d in specs)
    report = benchmark(candidates, examples, warmup=args.warmup, iters=args.iters, device=device,
                       progress=not args.quiet)
    return (EXIT_FAILED if report.failed else EXIT_OK), report.to_json(), report.to_table()


# ---------------------------------------------------------------------------------------------------- the parser
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) ending with the remedy."""

    def error(self, message: str) -> NoReturn:
        remedy = "see '" + self.prog + " --help'"
        sys.stderr.write(f"{self.prog}: error: {one_line(message, remedy)}\n")
        raise SystemExit(EXIT_USAGE)


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return int(text)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging and tracebacks on errors")


def _add_engine_host_code(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-engine-host-code", action="store_true",
                   help="let an engine that carries an embedded plugin library (built with embed_plugins=True) load "
                        "and run that library's code; only for engine files you trust (default: refused)")


def _add_inputs(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--input-shape", action="append", metavar="NAME:SHAPE", required=required,
                   help="input shape like x:1x3x224x224 (repeat or comma-separate for several inputs; a bare "
                        "1x3x224x224 means the next input in order)")
    p.add_argument("--dtype", choices=DTYPES, default="float32", help="dtype of the random inputs (default float32)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Export, build, inspect, validate and benchmark torchtrt_ext models.",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    kw: dict[str, Any] = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}

    p = sub.add_parser("export", help="PyTorch model -> ONNX (custom ops as torchtrt_ext nodes)",
                       description="Export a model (module:factory) to ONNX with dynamic batch.", **kw)
    p.add_argument("model", help="model spec: package.module:factory or path/to/file.py:factory")
    _add_inputs(p)
    p.add_argument("-o", "--output", required=True, help="path of the .onnx file to write")
    p.add_argument("--exporter", choices=("auto", "dynamo", "legacy"), default="auto", help="default auto")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default 18)")
    p.add_argument("--static", action="store_true", help="all dims static (default: batch dynamic)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--no-fuse", action="store_true", help="write the export as it is, without the fusion passes "
                   "compile() runs (L2 normalization patterns -> L2Norm nodes)")
    p.add_argument("--no-functions", action="store_true", help="write the custom nodes without their decompositions "
                   "as ONNX functions (then only a runtime with the plugins runs the file)")
    _add_common(p)
    p.set_defaults(handler=cmd_export)

    p = sub.add_parser("build", help="ONNX -> engine file", description="Build an engine from an ONNX file.", **kw)
    p.add_argument("onnx", help="the .onnx file")
    p.add_argument("-o", "--output", required=True, help="path of the engine file to write")
    p.add_argument("--backend", choices=BACKENDS, default="tensorrt", help="default tensorrt")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help="default fp32")
    p.add_argument("--plugins", choices=PLUGIN_MODES, default="auto",
                   help="custom nodes: C++ plugins, Python plugins, or decomposed into standard ops (default auto)")
    for which in ("min", "opt", "max"):
        p.add_argument(f"--{which}-shapes", metavar="NAME:SHAPE,...", help=f"{which} shapes of the profile, like "
                       "x:1x3x64x64,y:1x8 (default: batch 1..32 around the graph's shapes)")
    p.add_argument("--no-fuse", action="store_true", help="build the graph as it is, without the fusion passes "
                   "compile() runs (L2 normalization patterns -> L2Norm nodes)")
    p.add_argument("--workspace", type=_positive_int, metavar="MiB", help="workspace cap in MiB (default 4096)")
    p.add_argument("--timing-cache", metavar="PATH", help="TensorRT timing cache file, read and written back")
    p.add_argument("-q", "--quiet", "--no-progress", action="store_true", help="no progress lines on stderr")
    _add_common(p)
    p.set_defaults(handler=cmd_build)

    p = sub.add_parser("inspect", help="ONNX -> the doctor report; engine -> its metadata",
                       description="Report what TensorRT will make of an ONNX graph, or show an engine's metadata.",
                       **kw)
    p.add_argument("path", help="an .onnx file or an engine file")
    p.add_argument("--backend", choices=BACKENDS, default="tensorrt", help="backend the report is for")
    _add_common(p)
    p.set_defaults(handler=cmd_inspect)

    p = sub.add_parser("validate", help="compare a candidate with a reference on random inputs",
                       description="Run REFERENCE and CANDIDATE on the same random inputs and compare every output. "
                                   "ONNX files run on onnxruntime (CPU); engines need a GPU and a TensorRT runtime.",
                       **kw)
    p.add_argument("reference", help="model spec (module:factory) or .onnx file")
    p.add_argument("candidate", help=".onnx file (onnxruntime) or engine file")
    _add_inputs(p)
    p.add_argument("--trials", type=int, default=3, help="input sets (default 3)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default by precision)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default by precision)")
    p.add_argument("--precision", help="fp32, fp16 or bf16: picks the default tolerances (default: inferred)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--device", default="auto", help="cpu or cuda (default: cuda for engines, else cpu if no GPU)")
    _add_engine_host_code(p)
    _add_common(p)
    p.set_defaults(handler=cmd_validate)

    p = sub.add_parser("bench", help="time models, ONNX files and engines side by side",
                       description="Benchmark every TARGET on the same inputs: CUDA events on a GPU, a labelled "
                                   "host timer on the CPU.", **kw)
    p.add_argument("targets", nargs="+", help="model specs, .onnx files (onnxruntime) and engine files")
    _add_inputs(p)
    p.add_argument("--torch-compile", action="store_true", help="add a torch.compile row for each model spec")
    p.add_argument("--warmup", type=int, default=50, help="untimed runs per target (default 50)")
    p.add_argument("--iters", type=int, default=200, help="timed runs per target (default 200)")
    p.add_argument("--device", default="auto", help="cpu or cuda (default: cuda when torch sees a GPU)")
    _add_engine_host_code(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    _add_common(p)
    p.set_defaults(handler=cmd_bench)
    return parser


# ------------------------------------------------------------------------------------------------------- main
def _exit_code(exc: BaseException) -> int:
    from torchtrt_ext import errors

    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, (errors.CorruptEngineError, errors.HostCodeNotAllowedError)):
        return EXIT_USAGE
    if isinstance(exc, (errors.MissingDependencyError, errors.LibraryNotFoundError, errors.EngineCompatibilityError)):
        return EXIT_MISSING
    if isinstance(exc, (errors.ExportError, errors.BuildError)):
        return EXIT_BUILD
    if isinstance(exc, (errors.InvalidInputError, errors.InvalidAttributeError, FileNotFoundError)):
        return EXIT_USAGE
    if isinstance(exc, errors.TorchTRTExtError):
        return EXIT_BUILD
    return EXIT_INTERNAL


def _setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s: %(message)s"))
    root = logging.getLogger("torchtrt_ext")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    root.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error already printed on one line (2)
        return int(exc.code or 0)
    _setup_logging(args.verbose)
    with _stdout_to_stderr() if args.json else contextlib.nullcontext():
        try:
            code, data, text = args.handler(args)
        except KeyboardInterrupt:
            print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
            return 130
        except Exception as exc:  # noqa: BLE001 - the boundary: every error becomes one line and an exit code
            code = _exit_code(exc)
            line = error_line(exc, code)
            if args.verbose:
                traceback.print_exc()
            print(f"{PROG} {args.command}: error: {line}", file=sys.stderr)
            data, text = {"ok": False, "exit_code": code, "error": line}, None
    if args.json:
        _print(json.dumps(data, indent=2, default=str, allow_nan=False))
    elif text is not None:
        _print(text)
    return int(code)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send whatever is written to stdout meanwhile, by Python or by native code (TensorRT prints some warnings
    itself), to stderr, so that with --json stdout holds the JSON document only."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        ctypes.CDLL(None).fflush(None)  # C stdio buffers still holding native output go to stderr too
        os.dup2(saved, 1)
        os.close(saved)


def _print(text: str) -> None:
    """Print to stdout; a reader that stopped reading (``inspect ... | head``) is not an error."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the flush at exit does not fail again


if __name__ == "__main__":
    sys.exit(main())
