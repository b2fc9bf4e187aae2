"""Deploy an engine without Python: Triton Inference Server, trtexec, plain C++, and ONNX Runtime's TensorRT EP.

- ``triton_repository(engine, path, name, max_batch_size=...)`` writes a Triton model repository
  (``<path>/<name>/1/model.plan``, ``<path>/<name>/config.pbtxt``, the plugin libraries beside them) and returns the
  exact ``tritonserver`` command line, which loads the plugins through the TensorRT backend's documented option
  (``--backend-config=tensorrt,plugins=<path>/<name>/libtorchtrt_ext_plugins_autoload.so``).
- ``trtexec_command(engine_path, plugin_library)``: the ``trtexec --loadEngine=... --staticPlugins=...`` line.
- ``export_plan(engine, path)``: the bare TensorRT plan (what trtexec, Triton and a C++ program read); an ``Engine``
  file (``Engine.save``) wraps the plan with metadata and is read only by torchtrt_ext.
- ``to_ort_trt_plugins(model)``: the torchtrt_ext nodes moved into the ``trt.plugins`` domain, where ONNX Runtime's
  TensorRT execution provider exposes the creators of TensorRT's plugin registry as custom ops;
  ``ort_trt_providers()`` returns the providers list whose ``trt_extra_plugin_lib_paths`` option makes the EP load
  our plugins.

Loading the plugins: ``IPluginRegistry::loadLibrary``, Python's ``registry.load_library`` and trtexec's
``--staticPlugins``/``--dynamicPlugins`` call the ``getCreators`` entry point of ``libtorchtrt_ext_plugins.so``.
Triton's ``plugins=`` and ONNX Runtime's ``trt_extra_plugin_lib_paths`` only ``dlopen`` a library, so they get
``libtorchtrt_ext_plugins_autoload.so``, which registers the creators of the ``libtorchtrt_ext_plugins.so`` beside it
when loaded (and must be loaded after TensorRT: not with ``LD_PRELOAD``). ``plugin_library_registers_on_load`` tells
whether a library registers by itself; a library of another project that does not is shipped with a warning.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union

import onnx

from torchtrt_ext._files import atomic_copy, atomic_write, save_onnx
from torchtrt_ext.backend.engine import Engine, EngineMetadata, TensorInfo, is_engine_file
from torchtrt_ext.errors import InvalidInputError, LibraryNotFoundError, failure
from torchtrt_ext.ops.spec import DOMAIN
from torchtrt_ext.runtime import check_plugin_libraries

log = logging.getLogger("torchtrt_ext.deploy")

__all__ = ["DlopenPlugins", "ORT_TRT_DOMAIN", "TRITON_DTYPES", "TritonRepository", "dlopen_plugin_libraries",
           "export_for_ort_trt", "export_plan", "ort_trt_providers", "plugin_library_registers_on_load",
           "to_ort_trt_plugins", "triton_config", "triton_repository", "trtexec_command"]

#: torch dtype name (as ``EngineMetadata`` stores it) -> Triton model-config ``DataType``.
TRITON_DTYPES: dict[str, str] = {
    "bool": "TYPE_BOOL", "uint8": "TYPE_UINT8", "int8": "TYPE_INT8", "int16": "TYPE_INT16", "int32": "TYPE_INT32",
    "int64": "TYPE_INT64", "float16": "TYPE_FP16", "float32": "TYPE_FP32", "float64": "TYPE_FP64",
    "bfloat16": "TYPE_BF16",
}
#: the custom-op domain under which ONNX Runtime's TensorRT EP exposes TensorRT plugin creators.
ORT_TRT_DOMAIN = "trt.plugins"
EngineSource = Union[Engine, str, "os.PathLike[str]"]


def _engine(engine: EngineSource) -> Engine:
    if isinstance(engine, Engine):
        return engine
    if isinstance(engine, (str, os.PathLike)):
        return Engine.load(engine)
    raise InvalidInputError(failure(f"expected an Engine or the path of an engine file, got {type(engine).__name__}",
                                    "the result of build_engine, or a file written by Engine.save",
                                    "build it first: torchtrt_ext.backend.build_engine(onnx_model)"))


def export_plan(engine: EngineSource, path: str | os.PathLike[str]) -> Path:
    """Write the bare serialized TensorRT plan of ``engine`` to ``path`` (atomically) and return the path.

    This is the file trtexec (``--loadEngine``), Triton (``model.plan``) and ``IRuntime::deserializeCudaEngine`` read.
    """
    target = Path(path)
    atomic_write(target, _engine(engine).plan)
    return target


def plugin_library_registers_on_load(library: str | os.PathLike[str]) -> bool:
    """Whether ``library`` can register its plugin creators by itself when merely loaded (``dlopen``).

    A library registering at load time calls ``getPluginRegistry()`` (through ``REGISTER_TENSORRT_PLUGIN``, or as
    ``libtorchtrt_ext_plugins_autoload.so`` does), so its bytes contain that symbol name; one that does not, such as
    ``libtorchtrt_ext_plugins.so``, can only be loaded through its ``getCreators`` entry point
    (``IPluginRegistry::loadLibrary``, trtexec ``--staticPlugins``).
    """
    data = Path(library).read_bytes()
    return b"getPluginRegistry" in data


@dataclasses.dataclass(frozen=True)
class DlopenPlugins:
    """What to hand a loader that only ``dlopen``s plugin libraries (``dlopen_plugin_libraries``)."""

    load: Path  # the library to name in the loader's option
    files: tuple[Path, ...]  # every library that must travel (``load`` and what it loads from its own folder)
    registers_on_load: bool  # False: the loader will not see the creators (a warning was logged)


def dlopen_plugin_libraries(library: str | os.PathLike[str], loader: str = "a dlopen-only loader") -> DlopenPlugins:
    """The libraries to give a loader that only ``dlopen``s (Triton ``plugins=``, ONNX Runtime
    ``trt_extra_plugin_lib_paths``), for the plugin library ``library``.

    - ``libtorchtrt_ext_plugins.so``: load ``libtorchtrt_ext_plugins_autoload.so`` (from the same folder, else the one
      ``_native.plugin_autoload_library_path()`` finds), shipped together with it;
    - ``libtorchtrt_ext_plugins_autoload.so``: load it, shipped with the ``libtorchtrt_ext_plugins.so`` beside it;
    - another library that registers itself when loaded: load it alone;
    - another library that does not: load it alone and log a warning (``registers_on_load`` False).

    Raises LibraryNotFoundError when a companion library is missing. ``loader`` names the loader in messages.
    """
    from torchtrt_ext import _native

    lib = Path(library)
    if lib.name == _native.PLUGINS_AUTOLOAD_LIB:
        main = lib.parent / _native.PLUGINS_LIB
        if not main.is_file():
            raise LibraryNotFoundError(failure(
                f"{lib} loads {main.name} from its own folder, and there is none in {lib.parent}",
                f"{_native.PLUGINS_LIB} beside {lib.name}, as setup.py builds them",
                "pass the folder's libtorchtrt_ext_plugins.so instead, or rebuild (python setup.py build_ext "
                "--inplace)"))
        return DlopenPlugins(lib, (main, lib), True)
    if lib.name == _native.PLUGINS_LIB:
        autoload = lib.parent / _native.PLUGINS_AUTOLOAD_LIB
        if not autoload.is_file():
            try:
                autoload = _native.plugin_autoload_library_path()
            except LibraryNotFoundError as exc:
                raise LibraryNotFoundError(failure(
                    f"{loader} only loads libraries (dlopen), and {lib.name} registers its creators only through "
                    f"getCreators; its companion {_native.PLUGINS_AUTOLOAD_LIB}, which registers them when loaded, "
                    f"was not found beside it or built ({exc})",
                    f"{_native.PLUGINS_AUTOLOAD_LIB} next to {lib}",
                    "rebuild with TensorRT headers (python setup.py build_ext --inplace builds both), or serve an "
                    "engine built with plugins='decompose'")) from None
        return DlopenPlugins(autoload, (lib, autoload), True)
    if plugin_library_registers_on_load(lib):
        return DlopenPlugins(lib, (lib,), True)
    log.warning("%s only loads %s (dlopen); this library registers its plugin creators through getCreators, which "
                "%s does not call, so engines using its plugins will fail with 'plugin creator not found'. Remedy: "
                "give it a library that registers its creators when loaded (as %s does for %s)", loader, lib.name,
                loader, _native.PLUGINS_AUTOLOAD_LIB, _native.PLUGINS_LIB)
    return DlopenPlugins(lib, (lib,), False)


def _resolve_plugin_library(metadata: EngineMetadata, plugin_library: str | os.PathLike[str] | None) -> Path | None:
    if plugin_library is not None:
        lib = Path(plugin_library)
        if not lib.is_file():
            raise LibraryNotFoundError(failure(f"plugin library {lib} does not exist",
                                               "the path of libtorchtrt_ext_plugins.so",
                                               "build it (pip install -e . with TensorRT headers) or fix the path"))
        return lib
    if not metadata.plugins or metadata.plugins_embedded:
        return None
    from torchtrt_ext import _native

    try:
        return _native.plugin_library_path()
    except LibraryNotFoundError as exc:
        raise LibraryNotFoundError(failure(
            f"the engine needs the plugins {list(metadata.plugins)} at run time and no plugin library was given or "
            f"found ({exc})", "plugin_library= the libtorchtrt_ext_plugins.so the engine was built with",
            "pass plugin_library=..., or rebuild the engine with plugins='decompose' (no plugin needed)")) from None


# ----------------------------------------------------------------------------------------------------- Triton
@dataclasses.dataclass(frozen=True)
class TritonRepository:
    """What ``triton_repository`` wrote, and how to serve it."""

    root: Path
    name: str
    plan_path: Path
    config_path: Path
    config_text: str
    plugin_library: Path | None  # the library the server loads (plugins=), in the model folder
    command: str  # the shell command line that starts the server on this repository
    plugin_registers_on_load: bool | None  # None when no plugin library is involved
    plugin_files: tuple[Path, ...] = ()  # every library copied into the model folder
    user_libraries: tuple[Path, ...] = ()  # the user's own plugin libraries (plugin_libraries=), in the model folder

    def __str__(self) -> str:
        return self.command


def _dims(info: TensorInfo, max_batch_size: int, what: str) -> list[int]:
    shape = [int(d) for d in info.shape]
    if max_batch_size == 0:
        return shape
    if not shape or shape[0] != -1:
        raise InvalidInputError(failure(
            f"{what} {info.name!r} has shape {shape} in the engine, so it has no dynamic batch dimension",
            "with max_batch_size > 0, dim 0 of every input and output dynamic (-1) in the engine (Triton adds the "
            "batch dimension itself)",
            "pass max_batch_size=0 (Triton then uses the full shapes), or export with a dynamic batch "
            "(export_onnx's default)"))
    return shape[1:]


def _io_entry(info: TensorInfo, max_batch_size: int, kind: str) -> str:
    """One ``input``/``output`` entry, under Triton's rules for shapes (``ValidateIOShape``): ``dims`` is never empty,
    and an empty ``reshape`` is allowed only with batching, so a per-sample scalar (engine shape [B]) is ``dims: [ 1 ]``
    reshaped to ``[ ]``."""
    dims = _dims(info, max_batch_size, kind)
    reshape = ""
    if not dims and max_batch_size > 0:
        dims, reshape = [1], "    reshape: { shape: [ ] }\n"
    elif not dims:
        raise InvalidInputError(failure(
            f"{kind} {info.name!r} is a scalar (shape []) and max_batch_size=0",
            "Triton needs at least one dim per input and output, and allows an empty reshape only with batching",
            "pass max_batch_size > 0 with a dynamic batch, or return the value with shape [1] from the model"))
    return ("  {\n"
            f'    name: "{info.name}"\n'
            f"    data_type: {_dtype(info, kind)}\n"
            f"    dims: {_fmt_dims(dims)}\n"
            f"{reshape}"
            "  }")


def _warn_if_rtx(metadata: EngineMetadata) -> None:
    if metadata.backend == "tensorrt_rtx":
        log.warning("this is a TensorRT-RTX plan: Triton's TensorRT backend (platform tensorrt_plan) links full "
                    "TensorRT, which cannot load it. Serve it where the TensorRT-RTX runtime is (e.g. Triton's "
                    "Python backend running torchtrt_ext.load on an RTX-class GPU with tensorrt-rtx installed), or "
                    "rebuild with backend='tensorrt' on the serving GPU for the TensorRT backend")


def _dtype(info: TensorInfo, what: str) -> str:
    if info.dtype not in TRITON_DTYPES:
        raise InvalidInputError(failure(f"{what} {info.name!r} has dtype {info.dtype!r}",
                                        f"one of {sorted(TRITON_DTYPES)}", "cast it in the model"))
    return TRITON_DTYPES[info.dtype]


def _check_batch_range(metadata: EngineMetadata, max_batch_size: int) -> None:
    if max_batch_size == 0:
        return
    names = [i.name for i in metadata.inputs]
    for profile in metadata.profiles:
        if all(n in profile and profile[n].min[0] <= 1 and profile[n].max[0] >= max_batch_size for n in names):
            return
    ranges = "; ".join(", ".join(f"{n}: batch {p[n].min[0]}..{p[n].max[0]}" for n in names if n in p)
                       for p in metadata.profiles)
    raise InvalidInputError(failure(
        f"max_batch_size={max_batch_size} is outside the engine's profiles ({ranges})",
        "one profile covering batch 1..max_batch_size for every input (Triton sends any batch up to it)",
        "pass a smaller max_batch_size, or rebuild with max_batch=... or profiles=... covering it"))


def _fmt_dims(dims: Sequence[int]) -> str:
    return "[ " + ", ".join(str(d) for d in dims) + " ]"


def triton_config(engine: EngineSource, name: str, *, max_batch_size: int, dynamic_batching: bool = True,
                  preferred_batch_sizes: Sequence[int] | None = None, max_queue_delay_microseconds: int = 100,
                  instance_count: int = 1) -> str:
    """The ``config.pbtxt`` text (Triton's ``ModelConfig`` protobuf, text format) for ``engine``.

    Args:
        engine: an ``Engine`` or the path of an engine file.
        name: the model name (must equal the repository folder name).
        max_batch_size: the largest batch Triton forms or accepts; > 0 makes dim 0 of every input and output the
            implicit batch dimension (it must be dynamic in the engine and covered by a profile); 0 disables batching.
        dynamic_batching: add a ``dynamic_batching`` block (only with max_batch_size > 0). Default True.
        preferred_batch_sizes: batch sizes the dynamic batcher aims for. Default None (Triton's choice).
        max_queue_delay_microseconds: how long the batcher waits to fill a batch. Default 100.
        instance_count: engine instances per GPU. Default 1.
    """
    metadata = _engine(engine).metadata
    if not name or "/" in name or name in (".", ".."):
        raise InvalidInputError(failure(f"model name {name!r}", "a folder name without '/'", "pass e.g. 'detector'"))
    if max_batch_size < 0:
        raise InvalidInputError(failure(f"max_batch_size={max_batch_size}", "an int >= 0 (0: no batching)",
                                        "pass max_batch_size=0 or the largest batch to serve"))
    lines = [f'name: "{name}"', 'platform: "tensorrt_plan"', f"max_batch_size: {max_batch_size}"]
    _warn_if_rtx(metadata)
    for kind, infos in (("input", metadata.inputs), ("output", metadata.outputs)):
        entries = [_io_entry(info, max_batch_size, kind) for info in infos]
        lines.append(f"{kind} [\n" + ",\n".join(entries) + "\n]")
    _check_batch_range(metadata, max_batch_size)  # after the dims: a static batch is the more basic problem
    if dynamic_batching and max_batch_size > 0:
        block = ["dynamic_batching {"]
        if preferred_batch_sizes:
            bad = [b for b in preferred_batch_sizes if not 1 <= int(b) <= max_batch_size]
            if bad:
                raise InvalidInputError(failure(f"preferred_batch_sizes {bad}", f"sizes in 1..{max_batch_size}",
                                                "drop them or raise max_batch_size"))
            block.append(f"  preferred_batch_size: {_fmt_dims([int(b) for b in preferred_batch_sizes])}")
        block.append(f"  max_queue_delay_microseconds: {int(max_queue_delay_microseconds)}")
        block.append("}")
        lines.append("\n".join(block))
    elif dynamic_batching:
        log.info("dynamic_batching ignored: max_batch_size=0 means the model has no batch dimension Triton can use")
    lines.append(f"instance_group [\n  {{\n    count: {int(instance_count)}\n    kind: KIND_GPU\n  }}\n]")
    return "\n".join(lines) + "\n"


def triton_repository(engine: EngineSource, path: str | os.PathLike[str], name: str, *, max_batch_size: int,
                      plugin_library: str | os.PathLike[str] | None = None, dynamic_batching: bool = True,
                      preferred_batch_sizes: Sequence[int] | None = None, max_queue_delay_microseconds: int = 100,
                      instance_count: int = 1, version: int = 1, print_command: bool = True,
                      plugin_libraries: Sequence[str | os.PathLike[str]] | None = None) -> TritonRepository:
    """Write a Triton Inference Server model repository for ``engine`` and return it with the server command line.

    Layout: ``<path>/<name>/config.pbtxt``, ``<path>/<name>/<version>/model.plan`` (the bare TensorRT plan) and, when
    the engine needs plugins, the plugin libraries copied to ``<path>/<name>/``: ``libtorchtrt_ext_plugins.so`` and
    ``libtorchtrt_ext_plugins_autoload.so``, which registers its creators when the TensorRT backend loads it::

        tritonserver --model-repository=<path> \\
            --backend-config=tensorrt,plugins=<path>/<name>/libtorchtrt_ext_plugins_autoload.so

    (``--backend-config`` applies to the whole server: with several such models, any one copy serves them all.
    Not ``LD_PRELOAD``: that loads the library before TensorRT, when it cannot register; it then says so on stderr.)

    Args:
        engine: an ``Engine`` or the path of an engine file (``Engine.save``).
        path: the model repository folder (created; other models in it are left alone).
        name: the model name.
        max_batch_size: see ``triton_config``.
        plugin_library: the plugin library to ship (see ``dlopen_plugin_libraries`` for what travels with it).
            Default None: the built ``libtorchtrt_ext_plugins.so`` when the engine needs plugins
            (``engine.metadata.plugins``), nothing otherwise.
        dynamic_batching: see ``triton_config``. Default True.
        preferred_batch_sizes: see ``triton_config``. Default None.
        max_queue_delay_microseconds: see ``triton_config``. Default 100.
        instance_count: see ``triton_config``. Default 1.
        version: the model version folder. Default 1.
        print_command: print the command line. Default True.
        plugin_libraries: your own plugin libraries the engine was built with (checked against the SHA-256 its
            metadata records), copied beside ours and named in ``plugins=`` too. Default None.

    The engine must have been built on a GPU and TensorRT version matching the server's (TensorRT plans are bound to
    both); Triton's TensorRT backend must be of the same TensorRT version as the plugin library.
    """
    eng = _engine(engine)
    config = triton_config(eng, name, max_batch_size=max_batch_size, dynamic_batching=dynamic_batching,
                           preferred_batch_sizes=preferred_batch_sizes,
                           max_queue_delay_microseconds=max_queue_delay_microseconds, instance_count=instance_count)
    if int(version) < 1:
        raise InvalidInputError(failure(f"version={version}", "an int >= 1", "pass version=1"))
    root = Path(path).resolve()
    model_dir = root / name
    (model_dir / str(int(version))).mkdir(parents=True, exist_ok=True)
    plan_path = export_plan(eng, model_dir / str(int(version)) / "model.plan")
    config_path = model_dir / "config.pbtxt"
    atomic_write(config_path, config.encode())
    source_lib = _resolve_plugin_library(eng.metadata, plugin_library)
    theirs = [lib.path for lib in check_plugin_libraries(eng.metadata, plugin_libraries) if lib.path is not None]
    lib = None
    registers = None
    copied: list[Path] = []
    loaded: list[Path] = []  # what plugins= names, ours first
    parts = ["tritonserver", f"--model-repository={shlex.quote(str(root))}"]
    for index, source_path in enumerate(([source_lib] if source_lib is not None else []) + theirs):
        plugins = dlopen_plugin_libraries(source_path, "Triton's TensorRT backend (plugins=)")
        for source in plugins.files:
            target = model_dir / source.name
            if source.resolve() != target:
                atomic_copy(source, target)
            copied.append(target)
        loaded.append(model_dir / plugins.load.name)
        if index == 0 and source_lib is not None:
            lib, registers = loaded[0], plugins.registers_on_load
    if loaded:  # the TensorRT backend takes several libraries separated by ';'
        parts.append(shlex.quote(f"--backend-config=tensorrt,plugins={';'.join(map(str, loaded))}"))
    command = " ".join(parts)
    if print_command:
        print(command)
    return TritonRepository(root, name, plan_path, config_path, config, lib, command, registers, tuple(copied),
                            tuple(loaded[1:] if lib is not None else loaded))


# ---------------------------------------------------------------------------------------------------- trtexec
def trtexec_command(engine_path: str | os.PathLike[str], plugin_library: str | os.PathLike[str] | None = None, *,
                    extra: Sequence[str] = (), plugin_libraries: Sequence[str | os.PathLike[str]] = ()) -> str:
    """The ``trtexec`` command line that loads a bare plan and runs it: ``trtexec --loadEngine=<plan>
    --staticPlugins=<lib>`` (``--staticPlugins`` loads the library through its ``getCreators`` entry point; it may
    be repeated; ``--plugins`` is its deprecated spelling).

    ``engine_path`` must be a bare plan (``export_plan``), not an engine file written by ``Engine.save``.
    ``extra``: more trtexec arguments, e.g. ``["--shapes=image:4x3x64x64"]`` for a dynamic input.
    ``plugin_libraries``: your own plugin libraries, each one more ``--staticPlugins``.
    """
    plan = Path(engine_path)
    if is_engine_file(plan):
        raise InvalidInputError(failure(
            f"{plan} is a torchtrt_ext engine file (plan plus metadata), which trtexec cannot read",
            "the bare TensorRT plan", f"write it with torchtrt_ext.deploy.export_plan(Engine.load('{plan}'), "
            "'model.plan') and pass that path"))
    parts = ["trtexec", f"--loadEngine={shlex.quote(str(plan))}"]
    for library in ([plugin_library] if plugin_library is not None else []) + list(plugin_libraries):
        parts.append(f"--staticPlugins={shlex.quote(str(library))}")
    parts += [shlex.quote(a) for a in extra]
    return " ".join(parts)


# ----------------------------------------------------------------------------------------- ONNX Runtime TRT EP
def to_ort_trt_plugins(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose torchtrt_ext nodes are in the ``trt.plugins`` domain (opset import ``trt.plugins`` 1).

    ONNX Runtime's TensorRT execution provider registers every creator of TensorRT's plugin registry as a custom op
    of that domain, so the session accepts the node and TensorRT's ONNX parser builds it with our plugin. Op types and
    attributes are kept, including ``plugin_version`` and ``plugin_namespace``, which the parser uses to find the
    creator (name ``L2Norm``, version ``"1"``, namespace ``torchtrt_ext``).
    """
    from torchtrt_ext.passes.onnx_util import all_nodes

    out = onnx.ModelProto()
    out.CopyFrom(model)
    moved = 0
    for node in all_nodes(out):
        if node.domain == DOMAIN:
            node.domain = ORT_TRT_DOMAIN
            moved += 1
    imports = [e for e in out.opset_import if e.domain != DOMAIN]
    if moved and not any(e.domain == ORT_TRT_DOMAIN for e in imports):
        imports.append(onnx.helper.make_opsetid(ORT_TRT_DOMAIN, 1))
    del out.opset_import[:]
    out.opset_import.extend(imports)
    log.info("moved %d torchtrt_ext node(s) into the %s domain", moved, ORT_TRT_DOMAIN)
    return out


def export_for_ort_trt(model: Any, example_inputs: Any, path: str | os.PathLike[str] | None = None,
                       **export_kwargs: Any) -> onnx.ModelProto:
    """``export_onnx`` followed by ``to_ort_trt_plugins``: an ONNX model for ONNX Runtime's TensorRT EP.

    ``export_kwargs`` go to ``torchtrt_ext.export_onnx`` (``dynamic_shapes``, ``exporter``, ``opset``).
    """
    from torchtrt_ext.export import export_onnx

    converted = to_ort_trt_plugins(export_onnx(model, example_inputs, **export_kwargs))
    if path is not None:
        save_onnx(converted, path)
    return converted


def ort_trt_providers(plugin_library: str | os.PathLike[str] | None = None, *, device_id: int = 0,
                      trt_options: Mapping[str, Any] | None = None,
                      fallback: Sequence[str] = ("CUDAExecutionProvider", "CPUExecutionProvider")) -> list[Any]:
    """The ``providers=`` list for ``onnxruntime.InferenceSession`` that runs a ``to_ort_trt_plugins`` model.

    ``[("TensorrtExecutionProvider", {"device_id": 0, "trt_extra_plugin_lib_paths": <lib>, ...}), *fallback]``.
    The EP only ``dlopen``s the libraries and then lists the registry's creators, so ``<lib>`` is the library that
    registers them when loaded: ``libtorchtrt_ext_plugins_autoload.so`` beside ``plugin_library`` (see
    ``dlopen_plugin_libraries``). ``plugin_library``: default None: the built ``libtorchtrt_ext_plugins.so``.
    ``trt_options``: more TensorRT EP options (``trt_fp16_enable``, ``trt_engine_cache_enable``, ...).
    The EP must list IPluginV3 creators (``getAllCreators``; microsoft/onnxruntime#24211, 2025): older ones list only
    IPluginV2 creators and reject the ``trt.plugins`` node.
    """
    if plugin_library is None:
        from torchtrt_ext import _native

        plugin_library = _native.plugin_library_path()
    lib = Path(plugin_library)
    if not lib.is_file():
        raise LibraryNotFoundError(failure(f"plugin library {lib} does not exist",
                                           "the path of libtorchtrt_ext_plugins.so", "build it or fix the path"))
    plugins = dlopen_plugin_libraries(lib, "ONNX Runtime's trt_extra_plugin_lib_paths")
    options: dict[str, Any] = {"device_id": int(device_id), "trt_extra_plugin_lib_paths": str(plugins.load.resolve())}
    options.update(trt_options or {})
    return [("TensorrtExecutionProvider", options), *fallback]
