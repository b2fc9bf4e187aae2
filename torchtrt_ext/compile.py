"""``compile(model, example_inputs)``: export -> passes -> build (through the cache) -> ``TRTModule``.

Only a composition of the public steps (``export_onnx``, ``passes.pipeline``, ``cache.cached_build``,
``TRTModule``); each step can be run alone.
"""
from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from torchtrt_ext.backend.adapter import check_backend_name, load_backend
from torchtrt_ext.passes.precision import check_precision
from torchtrt_ext.backend.profiles import DEFAULT_MAX_BATCH, ProfileSpec, profiles_from_example_shapes
from torchtrt_ext.backend.options import BuildOptions
from torchtrt_ext.cache import CacheOption, cached_build
from torchtrt_ext.errors import InvalidInputError, TorchTRTExtError, failure
from torchtrt_ext.export import export_onnx, output_tree
from torchtrt_ext.passes import pipeline
from torchtrt_ext.runtime import TRTModule, require_gpu
from torchtrt_ext.validate import validate as run_validation

log = logging.getLogger("torchtrt_ext")

# precision -> minimum compute capability (major, minor) with native kernels for it
_MIN_CC = {"fp16": (5, 3), "bf16": (8, 0)}


def _as_inputs(example_inputs: Any) -> tuple[torch.Tensor, ...]:
    inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    for i, value in enumerate(inputs):
        if not isinstance(value, torch.Tensor):
            raise InvalidInputError(failure(f"example input {i} is a {type(value).__name__}", "torch tensors",
                                            "pass a tensor or a tuple of tensors, one per forward argument"))
    return inputs


def _check_backend(backend: str) -> None:
    """TensorRT importable, else the backend's error (its remedy names the pip extra and the other backend)."""
    check_backend_name(backend)
    load_backend(backend)


def _check_precision_on_gpu(precision: str, device: torch.device) -> None:
    need = _MIN_CC.get(precision)
    if need is None:
        return
    have = torch.cuda.get_device_capability(device)
    if tuple(have) < need:
        raise InvalidInputError(failure(
            f"precision={precision!r} on {torch.cuda.get_device_name(device)} (compute capability "
            f"{have[0]}.{have[1]})", f"compute capability >= {need[0]}.{need[1]} for {precision}",
            "use precision='fp32'" + (" or 'fp16'" if precision == "bf16" else "")))


def _model_device(model: torch.nn.Module) -> torch.device | None:
    for tensor in list(model.parameters()) + list(model.buffers()):
        return tensor.device
    return None


def compile(model: torch.nn.Module, example_inputs: Any, *, backend: str = "tensorrt", precision: str = "fp32",
            dynamic_shapes: Mapping[str, Mapping[int, str]] | None = None,
            profiles: ProfileSpec | Sequence[ProfileSpec] | None = None, plugins: str = "auto", fuse: bool = True,
            cache: CacheOption = True, workspace: int | None = None, validate: bool | None = None,
            cuda_graphs: bool = False, exporter: str = "auto", embed_plugins: bool = False,
            timing_cache: str | os.PathLike[str] | None = None, progress: bool = True,
            max_batch: int = DEFAULT_MAX_BATCH,
            plugin_libraries: Sequence[str | os.PathLike[str]] | None = None) -> TRTModule:
    """Compile ``model`` into a TensorRT engine wrapped in a drop-in ``TRTModule``.

    Args:
        model: the PyTorch model (switched to eval() with a warning if in training mode).
        example_inputs: a tensor or tuple of tensors, one per forward argument (CPU tensors are fine for the export;
            the returned module runs on CUDA tensors).
        backend: "tensorrt" or "tensorrt_rtx". Default "tensorrt".
        precision: "fp32", "fp16", "bf16" or "as_exported". Default "fp32".
        dynamic_shapes: ``{input: {dim: name}}`` as in ``export_onnx``. Default None (dynamic batch).
        profiles: optimization profiles (see ``build_engine``). Default None: batch 1..max(example, ``max_batch``).
        plugins: "auto", "cpp", "python" or "decompose". Default "auto".
        fuse: run the fusion passes (L2 normalization patterns -> L2Norm). Default True.
        cache: True (default folder), False, or a folder. Default True.
        workspace: builder workspace cap in bytes. Default None (see ``build_engine``).
        validate: compare with the PyTorch model after building and warn on misses. Default None: on when a GPU
            runtime is present (always, since compile needs one).
        cuda_graphs: replay CUDA graphs for repeated input shapes. Default False.
        exporter: "auto", "dynamo" or "legacy". Default "auto".
        embed_plugins: serialize the plugin library into the engine; the returned module may then run it (host code,
            see docs/deployment.md "Security"). Default False.
        timing_cache: TensorRT timing cache file. Default None.
        progress: print build progress. Default True.
        max_batch: upper batch bound of the default profile. Default 32.
        plugin_libraries: your own plugin libraries serving your autograd.Functions' symbolic nodes, loaded for the
            build and for the returned module (docs/byo-op.md). Default None.
    """
    if not isinstance(model, torch.nn.Module):
        raise InvalidInputError(failure(f"compile got a {type(model).__name__}", "a torch.nn.Module",
                                        "wrap the function in an nn.Module"))
    inputs = _as_inputs(example_inputs)
    check_precision(precision)
    if model.training:
        warnings.warn("compile(): the model is in training mode; switching it to eval() (dropout and batch-norm "
                      "behave as at inference)", stacklevel=2)
        model.eval()
    _check_backend(backend)
    device = require_gpu("compile() returns a module that runs the engine on the GPU, so it")
    _check_precision_on_gpu(precision, device)
    on_cpu = [i for i, t in enumerate(inputs) if t.device.type != "cuda"]
    if on_cpu:
        log.info("example inputs %s are on the CPU: fine for the export; call the compiled module with CUDA tensors",
                 on_cpu)
        model_device = _model_device(model)
        if model_device is not None and model_device.type == "cuda":
            inputs = tuple(t.to(model_device) for t in inputs)

    with torch.no_grad():
        eager = model(*inputs)
    tree = output_tree(eager)
    onnx_model = export_onnx(model, inputs, dynamic_shapes=dynamic_shapes, exporter=exporter)
    onnx_model = pipeline(onnx_model, fuse=fuse)
    if profiles is None:
        names = [v.name for v in onnx_model.graph.input if v.name not in {i.name for i in onnx_model.graph.initializer}]
        profiles = profiles_from_example_shapes(dict(zip(names, (tuple(t.shape) for t in inputs))), dynamic_shapes,
                                                max_batch=max_batch)
    options = BuildOptions.of(backend=backend, precision=precision, profiles=profiles, max_batch=max_batch,
                              workspace=workspace, plugins=plugins, embed_plugins=embed_plugins,
                              plugin_libraries=plugin_libraries)
    engine = cached_build(onnx_model, options, cache=cache, output_tree=tree, timing_cache=timing_cache,
                          progress=progress)
    # The engine was built here or read from the user's own cache under the key of these settings, so host code is
    # allowed exactly when the caller asked for embedding (a cached file that carries host code nobody asked for is
    # refused); docs/deployment.md "Security" says when a cache folder is not the user's own.
    module = TRTModule(engine, cuda_graphs=cuda_graphs, allow_engine_host_code=embed_plugins,
                       plugin_libraries=plugin_libraries)
    module.load_engine(device)
    if validate is None or validate:
        _validate(model, module, inputs, device, precision)
    return module


def _validate(model: torch.nn.Module, module: TRTModule, inputs: tuple[torch.Tensor, ...], device: torch.device,
              precision: str) -> None:
    """Compare on the example inputs (moved to the GPU); warn with the report's table on a miss."""
    cuda_inputs = tuple(t.to(device) for t in inputs)
    reference: Any = model
    if _model_device(model) not in (None, device):
        log.info("validation: the model is on %s; comparing against it with inputs moved there", _model_device(model))
        ref_device = _model_device(model)
        reference = lambda *xs: model(*(x.to(ref_device) for x in xs))  # noqa: E731
    try:
        report = run_validation(reference, module, cuda_inputs,
                                precision=precision if precision != "as_exported" else None)
    except TorchTRTExtError as exc:
        warnings.warn(f"compile(): validation could not run: {exc}", stacklevel=3)
        return
    if report.passed:
        log.info("validation passed:\n%s", report)
    else:
        warnings.warn(f"compile(): the engine does not match the PyTorch model within tolerance:\n{report}",
                      stacklevel=3)
