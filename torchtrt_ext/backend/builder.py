"""``build_engine``: ONNX -> TensorRT network -> serialized engine, with plugins, precision and profiles.

The steps compose, each a small function (in the manner of Polygraphy's loaders):

1. ``plan_build``: from the model and one ``BuildOptions`` value, load the backend, resolve the plugin plan (raising
   before any parsing when it cannot work), complete the profiles and work out the ``Target``: cheap;
2. ``graph_for_build``: precision transform -> decompose / complete inputs as planned;
3. ``network_from_onnx``: load the planned plugins and parse (the doctor reuses this step);
4. ``configure``: workspace, CUDA-graph capture flags, profiles, timing cache, progress, embedded plugins;
5. ``engine_from_network``: build and serialize; ``build_from_plan`` chains 2-5 into an ``Engine`` with metadata.

Caching is a separate step (``torchtrt_ext.cache.cached_build_engine``, on the same ``BuildPlan``), so
``build_engine`` always builds.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import onnx
import torch

from torchtrt_ext import _version
from torchtrt_ext._files import onnx_file_of
from torchtrt_ext.backend import remedies, timing_cache_file
from torchtrt_ext.backend.adapter import TRTApi, load_backend
from torchtrt_ext.backend.engine import TRT_DTYPE_NAMES, Engine, EngineMetadata, TensorInfo
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.backend.plugin_plan import PluginPlan
from torchtrt_ext.backend.plugins import load_plugins, prepare_graph, resolve_plugin_plan
from torchtrt_ext.backend.user_libraries import serve_user_nodes
from torchtrt_ext.passes.precision import PrecisionResult, apply_precision, check_precision
from torchtrt_ext.backend.profiles import (
    DEFAULT_MAX_BATCH,
    GraphShape,
    Profile,
    ProfileSpec,
    profiles_for_graph,
)
from torchtrt_ext.errors import BuildError, InvalidInputError, OnnxParseError, failure
from torchtrt_ext.ops.spec import DOMAIN
from torchtrt_ext.passes.onnx_util import read_onnx, stored_output_tree
from torchtrt_ext.passes.shapes import too_big

if TYPE_CHECKING:
    import tensorrt as trt_t

log = logging.getLogger("torchtrt_ext.backend")

OnnxSource = Union[onnx.ModelProto, str, "os.PathLike[str]", bytes]
DEFAULT_WORKSPACE = 4 << 30  # bytes; capped at half the GPU's memory when one is visible

_NO_FAILING_NODE = "  (TensorRT reported no node; see the log 'torchtrt_ext.backend')"


def load_onnx(source: OnnxSource) -> onnx.ModelProto:
    """A ModelProto from a ModelProto, a path, or serialized bytes (``passes.onnx_util.read_onnx``)."""
    return read_onnx(source, "build_engine's model")


def graph_inputs(model: onnx.ModelProto) -> dict[str, GraphShape]:
    """Real inputs (initializers excluded) -> shape with None for dynamic dims."""
    inits = {i.name for i in model.graph.initializer}
    out: dict[str, GraphShape] = {}
    for value in model.graph.input:
        if value.name in inits:
            continue
        dims = value.type.tensor_type.shape.dim
        out[value.name] = [d.dim_value if d.HasField("dim_value") else None for d in dims]
    return out


def current_gpu() -> tuple[str | None, str | None]:
    """(name, "major.minor") of torch's current CUDA device, or (None, None) without one."""
    try:
        if not torch.cuda.is_available():
            return None, None
        index = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        return torch.cuda.get_device_name(index), f"{major}.{minor}"
    except Exception:  # noqa: BLE001 - a broken CUDA setup means "no GPU" for the metadata
        return None, None


def default_workspace() -> int:
    """The builder's workspace cap in bytes: ``DEFAULT_WORKSPACE``, or half the current GPU's memory when less."""
    try:
        if torch.cuda.is_available():
            total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
            return int(min(DEFAULT_WORKSPACE, total // 2))
    except Exception:  # noqa: BLE001
        pass
    return DEFAULT_WORKSPACE


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """What a build will do, decided before any graph work: the model, the ``BuildOptions`` asked for, the plugin
    plan, the profiles completed for the graph, and the ``Target`` (the engine cache keys on options and target)."""

    api: TRTApi
    model: onnx.ModelProto
    options: BuildOptions
    plan: PluginPlan
    profiles: tuple[Profile, ...]
    target: Target


def plan_build(onnx_model_or_path: OnnxSource, options: BuildOptions) -> BuildPlan:
    """Step 1: the backend, the model, the plugin plan (resolved once, per op), the profiles and the ``Target``: the
    one place that works out the GPU and TensorRT facts. Raises for impossible combinations before any parsing."""
    api = load_backend(options.backend)
    model = load_onnx(onnx_model_or_path)
    check_precision(options.precision)
    plan = resolve_plugin_plan(options.plugins, api, model)  # raises before any parsing when the plan cannot work
    plan = dataclasses.replace(plan, user_ops=serve_user_nodes(api, model, options.plugin_libraries))
    if options.embed_plugins and not ((plan.mode == "cpp" or plan.user_ops) and api.can_embed_plugins()):
        raise InvalidInputError(failure(
            f"embed_plugins=True with plugin mode {plan.mode!r} on {api.name}",
            "the C++ plugin library (plugins='cpp' or 'auto' with the library built), or a plugin library of yours "
            "serving a node (plugin_libraries=), on a TensorRT with IBuilderConfig.plugins_to_serialize",
            "drop embed_plugins, or build the plugin library and pass plugins='cpp'"))
    theirs = sorted({op.op_type for op in plan.ops if op.route == "tensorrt"})
    if options.embed_plugins and theirs and api.embedding_is_version_compatible:
        raise InvalidInputError(failure(
            f"embed_plugins=True on {api.name} {api.version} makes a version-compatible engine that carries our plugin "
            f"library only, and {theirs} would come from TensorRT's own plugin library, which such an engine cannot "
            "use; the version-compatible plugin libraries TensorRT's parser names for it "
            "(OnnxParser.get_used_vc_plugin_libraries, libnvinfer_vc_plugin; trtexec --versionCompatible embeds "
            "them) are not embedded by torchtrt_ext", "only ops our plugin library serves (or decomposed ones) when "
            "embedding",
            "drop embed_plugins: the engine then loads TensorRT's plugin library and ours where it runs"))
    # graph inputs keep their names and exported types through precision and decomposition
    full_profiles = profiles_for_graph(graph_inputs(model), list(options.profiles) or None,
                                       max_batch=options.max_batch)
    gpu_name, cc = current_gpu()
    target = Target(api.name, api.version, gpu_name, cc, plan.library_sha256)
    return BuildPlan(api, model, options, plan, tuple(full_profiles), target)


def graph_for_build(build: BuildPlan) -> PrecisionResult:
    """Step 2: the graph TensorRT parses: typed for the precision, then decomposed / completed as planned."""
    # precision first: custom nodes are opaque to it and keep FP32 math, also once decomposed
    typed = apply_precision(build.model, build.options.precision)
    typed = dataclasses.replace(typed, model=prepare_graph(typed.model, build.plan))
    return typed


def build_from_plan(build: BuildPlan, *, timing_cache: str | os.PathLike[str] | None = None, progress: bool = True,
                    output_tree: dict[str, Any] | None = None) -> Engine:
    """Steps 2-5: the engine of a ``BuildPlan``, with its metadata (the plan recorded per op)."""
    try:
        return _engine_of(build, timing_cache=timing_cache, progress=progress, output_tree=output_tree)
    except BaseException as exc:
        # The failed build's builder, network and parser would live on in the traceback's frames; when a later
        # garbage collection frees them from inside another build's Python callback (logger, progress monitor),
        # TensorRT-RTX deadlocks on its own lock (seen: IBuilder dealloc under gc in a test run). Free them now.
        traceback.clear_frames(exc.__traceback__)
        raise


def _engine_of(build: BuildPlan, *, timing_cache: str | os.PathLike[str] | None, progress: bool,
               output_tree: dict[str, Any] | None) -> Engine:
    api, plan = build.api, build.plan
    typed = graph_for_build(build)
    with api.messages() as records:
        builder, network = network_from_onnx(api, typed.model, plan, api.logger(), records)
        config = configure(builder, network, build, timing_cache=timing_cache, progress=progress)
        plan_bytes = engine_from_network(api, builder, network, config, records, timing_cache=timing_cache)
    inputs = tuple(_info(network.get_input(i)) for i in range(network.num_inputs))
    outputs = tuple(_info(network.get_output(i)) for i in range(network.num_outputs))
    metadata = EngineMetadata(
        inputs=inputs, outputs=outputs, profiles=build.profiles, options=build.options, target=build.target,
        plugin_plan=dataclasses.replace(plan, library=None, library_sha256=None),  # the hash is in the target
        plugins_embedded=build.options.embed_plugins,
        output_tree=output_tree if output_tree is not None else stored_output_tree(build.model),
        torchtrt_ext_version=_version.__version__)
    return Engine(plan_bytes, metadata)


def build_engine(onnx_model_or_path: OnnxSource, *, backend: str = "tensorrt", precision: str = "fp32",
                 profiles: ProfileSpec | Sequence[ProfileSpec] | None = None, workspace: int | None = None,
                 plugins: str = "auto", timing_cache: str | os.PathLike[str] | None = None, progress: bool = True,
                 embed_plugins: bool = False, output_tree: dict[str, Any] | None = None,
                 max_batch: int = DEFAULT_MAX_BATCH,
                 plugin_libraries: Sequence[str | os.PathLike[str]] | None = None) -> Engine:
    """Build a TensorRT engine from an ONNX model; always builds (``cache.cached_build_engine`` adds the cache).

    Args:
        onnx_model_or_path: an ``onnx.ModelProto``, a path to a .onnx file, or its bytes.
        backend: "tensorrt" or "tensorrt_rtx". Default "tensorrt".
        precision: "fp32", "fp16", "bf16" (mixed: sensitive ops stay FP32) or "as_exported". Default "fp32".
        profiles: one profile or a list, each ``{input: (min, opt, max)}``. None: batch 1..``max_batch``.
        workspace: workspace memory cap in bytes. None: 4 GiB, or half the GPU's memory if less.
        plugins: "auto", "cpp", "python" or "decompose" (see ``backend.plugins``). Default "auto".
        timing_cache: path of a TensorRT timing cache file, read if present and written back. Default None.
        progress: print one stderr line per build phase. Default True.
        embed_plugins: serialize the C++ plugin library into the plan (plugins="cpp"). Default False.
        output_tree: structure of the original model's outputs, recorded for ``TRTModule``. Default None: the one
            export recorded in the model's metadata, else flat.
        max_batch: upper batch bound of the default profile. Default 32.
        plugin_libraries: paths of your own plugin libraries serving custom nodes of your domains, loaded before
            parsing and recorded by name and SHA-256 (docs/byo-op.md). Default None.
    """
    options = BuildOptions.of(backend=backend, precision=precision, profiles=profiles, max_batch=max_batch,
                              workspace=workspace, plugins=plugins, embed_plugins=embed_plugins,
                              plugin_libraries=plugin_libraries)
    return build_from_plan(plan_build(onnx_model_or_path, options), timing_cache=timing_cache, progress=progress,
                           output_tree=output_tree)


@dataclasses.dataclass(frozen=True)
class ParserError:
    """One error of TensorRT's ONNX parser: the failing node's name and op_type, the error code name, the text, and
    the node's domain where it is not the standard one."""

    node: str
    op_type: str
    code: str
    desc: str
    domain: str = ""  # the node's domain where it is not the standard one (e.g. a custom op's)
    index: int = -1  # the node's index in the main graph; outside it when the parser names no node


def parser_errors(parser: trt_t.OnnxParser, model: onnx.ModelProto) -> list[ParserError]:
    """The parser's errors after a failed ``parse``, each tied to its node of ``model``."""
    errors = []
    for i in range(parser.num_errors):
        error = parser.get_error(i)
        index = error.node()
        node = model.graph.node[index] if 0 <= index < len(model.graph.node) else None
        name = error.node_name() or (node.name if node is not None else "") or f"#{index}"
        op_type = error.node_operator() or (node.op_type if node is not None else "?")
        domain = node.domain if node is not None and node.domain not in ("", "ai.onnx") else ""
        errors.append(ParserError(name, op_type, error.code().name, error.desc().strip(), domain, index))
    return errors


def network_from_onnx(api: TRTApi, model: onnx.ModelProto, plan: PluginPlan, logger: trt_t.ILogger,
                      records: list[tuple[str, str]] | None = None) -> tuple[trt_t.Builder, trt_t.INetworkDefinition]:
    """Step 3: load the plan's plugins and parse ``model`` into a (strongly typed where weak typing is gone) network.

    Raises OnnxParseError (a BuildError) listing the failing nodes when the parser rejects the graph, with the
    logger's ``records`` (a plugin's own messages among them) when given.
    """
    load_plugins(api, plan)
    builder: trt_t.Builder = api.trt.Builder(logger)
    network: trt_t.INetworkDefinition = builder.create_network(api.network_flags())  # strongly typed everywhere
    parser: trt_t.OnnxParser = api.trt.OnnxParser(network, logger)
    if _parse(parser, model):
        return builder, network
    errors = parser_errors(parser, model)
    listed = "\n".join(f"  - node {e.node} ({e.domain + '::' if e.domain else ''}{e.op_type}): {e.desc}"
                       for e in errors)
    said = f"\nTensorRT said:\n{_said(records)}" if records is not None else ""
    # plugins='decompose' replaces torchtrt_ext nodes only: for nodes of other custom domains alone, it cannot help.
    foreign = bool(errors) and all(e.domain and e.domain != DOMAIN for e in errors)
    remedy = remedies.parse_remedy([e.desc for e in errors] + [m for _, m in records or ()], foreign=foreign)
    raise OnnxParseError(f"{api.name} {api.version} could not parse the ONNX graph; failing nodes:\n"
                         f"{listed or _NO_FAILING_NODE}{said}",
                         expected="nodes TensorRT's ONNX parser supports, or plugin nodes whose plugin is loaded",
                         remedy=remedy, nodes=tuple(errors))


def _parse(parser: trt_t.OnnxParser, model: onnx.ModelProto) -> bool:
    """Parse ``model``; one over protobuf's 2 GiB limit from a file with external data, which the parser reads."""
    if not too_big(model):
        return bool(parser.parse(model.SerializeToString()))
    with onnx_file_of(model) as path:
        return bool(parser.parse_from_file(str(path)))


def configure(builder: trt_t.Builder, network: trt_t.INetworkDefinition, build: BuildPlan, *,
              timing_cache: str | os.PathLike[str] | None, progress: bool) -> trt_t.IBuilderConfig:
    """Step 4: the builder config of ``build``: workspace, the flags that let the engine be captured in CUDA graphs,
    profiles, timing cache, progress monitor, the plugin library to embed."""
    api, trt = build.api, build.api.trt
    workspace = build.options.workspace
    config: trt_t.IBuilderConfig = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace or default_workspace())
    for flag in api.capture_flags(network):  # any engine may later run with cuda_graphs=True
        config.set_flag(flag)

    names = {network.get_input(i).name for i in range(network.num_inputs)}
    for profile in build.profiles:
        opt_profile: trt_t.IOptimizationProfile = builder.create_optimization_profile()
        for name, shape_range in profile.items():
            if name in names:
                opt_profile.set_shape(name, api.dims(shape_range.min), api.dims(shape_range.opt),
                                      api.dims(shape_range.max))
        config.add_optimization_profile(opt_profile)

    cache_path = _timing_cache_path(api, timing_cache)
    if cache_path is not None:
        timing_cache_file.attach(config, cache_path)
    monitor = api.make_progress_monitor() if progress else None
    if monitor is not None:
        config.progress_monitor = monitor
    if build.options.embed_plugins:
        ours = [str(build.plan.library)] if build.plan.library is not None else []
        api.set_plugins_to_serialize(config, ours + [str(lib.path) for lib in build.options.plugin_libraries])
    return config


def _timing_cache_path(api: TRTApi, timing_cache: str | os.PathLike[str] | None) -> Path | None:
    if timing_cache is not None and api.is_rtx:
        log.info("timing_cache ignored: %s has no timing cache", api.name)
        return None
    return Path(timing_cache) if timing_cache is not None else None


def engine_from_network(api: TRTApi, builder: trt_t.Builder, network: trt_t.INetworkDefinition,
                        config: trt_t.IBuilderConfig, records: list[tuple[str, str]], *,
                        timing_cache: str | os.PathLike[str] | None) -> bytes:
    """Step 5: build and serialize; writes the timing cache back. ``records``: the logger's (level, message) list,
    quoted when the build fails."""
    started = time.monotonic()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuildError(f"{api.name} {api.version} failed to build the engine. TensorRT said:\n{_said(records)}",
                         expected="a network TensorRT can implement with the given precision and profiles",
                         remedy=remedies.build_remedy(records))
    plan_bytes = bytes(serialized)
    log.info("built %s engine: %d bytes in %.1f s", api.name, len(plan_bytes), time.monotonic() - started)
    cache_path = _timing_cache_path(api, timing_cache)
    if cache_path is not None:
        timing_cache_file.save(config, cache_path)
    return plan_bytes


def _said(records: list[tuple[str, str]]) -> str:
    """The last TensorRT errors and warnings, one indented line each (a plugin's own messages among them)."""
    return "\n".join(f"  {level}: {msg}" for level, msg in records[-15:]) or (
        "  (no message reached torchtrt_ext: TensorRT logs through the logger of the first builder or runtime still "
        "alive, which may be another library's)")


def _info(tensor: trt_t.ITensor) -> TensorInfo:
    dtype = TRT_DTYPE_NAMES.get(tensor.dtype.name, tensor.dtype.name.lower())
    shape = tensor.shape
    return TensorInfo(tensor.name, dtype, tuple(int(shape[i]) for i in range(len(shape))))
