"""What a subcommand runs: model specs, ONNX files and engine files, made runnable on one device."""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchtrt_ext.backend.adapter import load_backend
from torchtrt_ext.backend.engine import Engine, is_engine_file
from torchtrt_ext.cli._args import existing
from torchtrt_ext.cli._errors import CliError
from torchtrt_ext.errors import NoGPUError
from torchtrt_ext.runtime import TRTModule, check_compatible


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


def custom_nodes(model: Any) -> list[str]:
    """The op types of the model's torchtrt_ext nodes, in graph order."""
    from torchtrt_ext.ops import DOMAIN

    return [n.op_type for n in model.graph.node if n.domain == DOMAIN]


def spec_file(spec: str) -> str | None:
    """The source file of a model spec's module (after ``load_model`` imported it)."""
    module_name = spec.rpartition(":")[0]
    if module_name.endswith(".py"):
        return module_name
    return getattr(sys.modules.get(module_name), "__file__", None)


def target_kind(text: str) -> str:
    """'onnx', 'engine' or 'model' for a positional target."""
    path = Path(text)
    if text.endswith(".onnx"):
        existing(text, "ONNX file")
        return "onnx"
    if path.is_file():
        if is_engine_file(path):
            return "engine"
        raise CliError(f"{path} is neither an .onnx file nor a torchtrt_ext engine file. Remedy: pass an .onnx "
                       "file, an engine written by 'torchtrt-ext build', or a model spec module:factory")
    if ":" in text and not text.endswith((".engine", ".plan", ".trt")):
        return "model"
    raise CliError(f"{text} does not exist. Remedy: check the path, or write a model spec as module:factory")


def check_engine_host_code(targets: Sequence[str], kinds: Sequence[str], allowed: bool) -> None:
    """Refuse engines that carry host code before anything else happens (GPU checks included) unless allowed."""
    from torchtrt_ext.runtime import check_host_code_allowed

    for text, kind in zip(targets, kinds):
        if kind == "engine":
            check_host_code_allowed(Engine.load(text).metadata, allowed, f"engine file {text}")


def declared_inputs(*targets: Any) -> list[tuple[str, tuple[int, ...], Any]]:
    """(name, shape, torch dtype) of each input the first ONNX model or engine among ``targets`` declares; [] when
    none does (model specs declare no types)."""
    from torchtrt_ext.validate import OnnxRuntimeModule, input_specs_of

    for target in targets:
        if isinstance(target, OnnxRuntimeModule):
            return target.input_specs()
        specs = input_specs_of(target)
        if specs is not None:
            names = [info.name for info in target.metadata.inputs]
            return [(name, shape, dtype) for name, (shape, dtype) in zip(names, specs)]
    return []


def check_engine_libraries(targets: Sequence[str], kinds: Sequence[str], libraries: Sequence[str] | None) -> None:
    """Refuse engines built with a plugin library of the user's that ``libraries`` (--plugin-library) does not name
    with the recorded SHA-256, before anything else happens (GPU checks included)."""
    from torchtrt_ext.runtime import check_plugin_libraries

    for text, kind in zip(targets, kinds):
        if kind == "engine":
            check_plugin_libraries(Engine.load(text).metadata, libraries)


def examples_for(shapes: dict[str, tuple[int, ...]], model: Any, dtype: Any, device: Any,
                 ranges: dict[str, tuple[float, float]] | None = None,
                 declared: Sequence[tuple[str, tuple[int, ...], Any]] = (), *,
                 declared_floats: bool = False) -> tuple[Any, ...] | None:
    """Random example inputs from --input-shape (named ones ordered like forward's parameters), each of the type
    ``declared`` by an ONNX model or engine where it is integer or bool (or any type, with ``declared_floats``), else
    int64 for a model spec's input given an integer --input-range, else ``dtype``; values in its --input-range
    (``validate.random_input``)."""
    import inspect

    import torch

    from torchtrt_ext.validate import random_input

    if not shapes:
        return None
    ranges = ranges or {}
    named = {k: v for k, v in shapes.items() if not k.startswith("#")}
    if named and isinstance(model, torch.nn.Module):
        params = list(inspect.signature(model.forward).parameters)
        unknown = [n for n in named if n not in params]
        if unknown:
            raise CliError(f"--input-shape names {unknown}, but {type(model).__name__}.forward takes {params}. "
                           "Remedy: use the forward parameter names")
        order = [p for p in params if p in named] + [k for k in shapes if k.startswith("#")]
    else:
        order = list(shapes)
    unknown = [n for n in ranges if n not in order]
    if unknown:
        raise CliError(f"--input-range names {unknown}, but the inputs are {order}. Remedy: name an input of "
                       "--input-shape")
    kept = [(i, name, t) for i, (name, _, t) in enumerate(declared) if declared_floats or not t.is_floating_point]
    types = {key: t for i, name, t in kept for key in (name, f"#{i}")}

    def type_of(name: str) -> Any:
        if name in types:
            return types[name]
        if name in ranges and all(isinstance(v, int) for v in ranges[name]):
            return torch.int64
        return dtype
    generator = torch.Generator().manual_seed(0)
    return tuple(random_input(shapes[n], type_of(n), device, generator, ranges.get(n)) for n in order)


def open_target(text: str, device: Any, dtype: Any, allow_engine_host_code: bool,
                plugin_libraries: Sequence[str] | None = None, *, isolated: bool = True) -> tuple[str, Any]:
    """(kind, something callable) for a target: onnxruntime for an ONNX file (in a worker process unless
    ``isolated=False``, which timing needs), a TRTModule for an engine, the model."""
    kind = target_kind(text)
    if kind == "onnx":
        from torchtrt_ext.validate import OnnxRuntimeModule

        return kind, OnnxRuntimeModule(text, isolated=isolated)
    if kind == "engine":
        engine = Engine.load(text)
        # another TensorRT or GPU is refused here (exit 3), not at the first call, where bench would time it as a
        # failed candidate (exit 1)
        check_compatible(engine.metadata, load_backend(engine.metadata.backend), device)
        return kind, TRTModule(engine, allow_engine_host_code=allow_engine_host_code, plugin_libraries=plugin_libraries)
    return kind, load_model(text).to(device=device, dtype=dtype)


def device_for(choice: str, kinds: Sequence[str]) -> Any:
    """The torch device of --device ``choice`` for targets of ``kinds``; NoGPUError where it needs a GPU torch lacks."""
    import torch

    if "engine" in kinds and not torch.cuda.is_available():  # before any engine is loaded
        raise NoGPUError(
            "running an engine needs a CUDA GPU, and torch sees none",
            remedy="run it on the target GPU, or compare with the ONNX export on onnxruntime instead (torchtrt-ext "
            "validate MODEL model.onnx)")
    if choice == "auto":
        return torch.device("cuda" if "engine" in kinds or torch.cuda.is_available() else "cpu")
    if choice not in ("cpu", "cuda") and not re.fullmatch(r"cuda:\d+", choice):
        raise CliError(f"--device {choice!r} is not a device. Remedy: use cpu, cuda or cuda:N")
    if choice.startswith("cuda") and not torch.cuda.is_available():
        raise NoGPUError(f"--device {choice} but torch sees no CUDA GPU", remedy="use --device cpu")
    return torch.device(choice)

