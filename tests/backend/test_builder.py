"""build_engine on TensorRT-RTX: real serialized engines on a CPU-only machine, plugin modes, parser errors (engines
with our C++ plugins inside: test_rtx_plugins.py)."""
from __future__ import annotations

import importlib.util
import logging
import re
import subprocess
import sys
from pathlib import Path

import onnx
import torch
import pytest
from onnx import TensorProto, helper

import torchtrt_ext
from tests.helpers import raw_custom_graph
from torchtrt_ext.backend import Engine, build_engine, load_backend
from torchtrt_ext import _native
from torchtrt_ext.passes.onnx_util import non_standard_nodes
from torchtrt_ext.errors import BuildError, InvalidInputError, LibraryNotFoundError, MissingDependencyError

TWO_PROFILES = [{"x": ((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 8, 8))},
                {"x": ((5, 3, 8, 8), (8, 3, 8, 8), (16, 3, 8, 8))}]


def test_conv_dynamic_batch_two_profiles_builds_a_real_engine(rtx: str, conv_onnx: onnx.ModelProto,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    engine = build_engine(conv_onnx, backend=rtx, profiles=TWO_PROFILES, progress=True)
    assert isinstance(engine, Engine)
    assert len(engine.plan) > 10_000  # a real serialized plan, not a placeholder
    meta = engine.metadata
    assert [(t.name, t.dtype, t.shape) for t in meta.inputs] == [("x", "float32", (-1, 3, 8, 8))]
    assert [(t.dtype, t.shape) for t in meta.outputs] == [("float32", (-1, 4, 8, 8))]
    assert [p["x"].max for p in meta.profiles] == [(4, 3, 8, 8), (16, 3, 8, 8)]
    assert meta.backend == "tensorrt_rtx" and meta.trt_version == load_backend(rtx).version
    assert meta.plugin_mode == "none" and meta.plugins == ()
    assert meta.options.precision == "fp32"
    assert "[torchtrt_ext] Building engine" in capsys.readouterr().err  # IProgressMonitor lines


def test_l2norm_through_decompose_builds_a_real_engine(rtx: str, l2norm_onnx: onnx.ModelProto) -> None:
    engine = build_engine(l2norm_onnx, backend=rtx, plugins="decompose", progress=False)
    assert len(engine.plan) > 10_000
    assert engine.metadata.plugin_mode == "decompose"
    assert engine.metadata.plugins == ()  # nothing to load at run time
    assert engine.metadata.profiles[0]["x"].max[0] == 32  # default: batch 1..32


def test_auto_decomposes_on_rtx_when_the_plugin_library_is_not_built(rtx: str, l2norm_onnx: onnx.ModelProto,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """RTX takes no Python plugins, so 'auto' without the C++ library decomposes. The missing library is a stand-in
    (the lookup raises as it does where setup.py skipped the build); the engine is RTX's real one."""
    def not_built() -> Path:
        raise LibraryNotFoundError("libtorchtrt_ext_plugins.so not found (stand-in)")

    monkeypatch.setattr(_native, "plugin_library_path", not_built)
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        engine = build_engine(l2norm_onnx, backend=rtx, plugins="auto", progress=False)
    assert engine.metadata.plugin_mode == "decompose"
    assert "plugins='auto' on tensorrt_rtx: C++ plugin library not built, using 'decompose' for L2Norm" in caplog.text


def test_fp16_build_keeps_the_normalization_in_fp32(rtx: str, l2norm_onnx: onnx.ModelProto) -> None:
    engine = build_engine(l2norm_onnx, backend=rtx, precision="fp16", plugins="decompose", progress=False)
    assert engine.metadata.options.precision == "fp16"
    assert [t.dtype for t in engine.metadata.inputs + engine.metadata.outputs] == ["float32", "float32"]


def test_python_plugins_on_rtx_are_refused_before_the_parser(rtx: str, l2norm_onnx: onnx.ModelProto,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    trt = load_backend(rtx).trt

    def parser_must_not_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("the ONNX parser was reached")

    monkeypatch.setattr(trt, "OnnxParser", parser_must_not_run)
    with pytest.raises(BuildError, match=r"plugins='python' cannot be used with backend='tensorrt_rtx'.*imports "
                                         r"IPluginV3 plugins registered with an IPluginCreatorV3One creator only.*"
                                         r"Remedy: pass plugins='cpp'"):
        build_engine(l2norm_onnx, backend=rtx, plugins="python", progress=False)


_PARSE_IN_A_FRESH_PROCESS = """
from tests.helpers import raw_custom_graph
from torchtrt_ext.backend import build_engine
from torchtrt_ext.errors import BuildError
try:
    build_engine(raw_custom_graph({domain!r}, {op_type!r}), backend="tensorrt_rtx", progress=False)
except BuildError as exc:
    print(exc)
else:
    print("built without a plugin")
"""


@pytest.mark.parametrize(("domain", "op_type"), [("acme", "MyOp"), ("", "EfficientNMS_TRT")])
def test_a_node_without_a_plugin_is_a_parse_error_on_rtx(rtx: str, domain: str, op_type: str) -> None:
    """A foreign-domain node, or a standard-domain op ONNX does not define, reaches RTX's real plugin importer, which
    finds no creator and says so (the process abort needed a creator that made a plugin, see test_rtx_plugins).
    In a fresh process: an earlier test that loaded our plugin library left EfficientNMS_TRT in this process's
    registry, which the library cannot be unloaded from."""
    qualified = f"{domain}::{op_type}" if domain else op_type  # the node's domain is named where not standard
    run = subprocess.run([sys.executable, "-c", _PARSE_IN_A_FRESH_PROCESS.format(domain=domain, op_type=op_type)],
                         capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert run.returncode == 0, run.stderr
    assert re.search(rf"could not parse the ONNX graph; failing nodes:\n  - node custom0 \({qualified}\): "
                     rf".*Plugin not found", run.stdout, re.S), run.stdout + run.stderr


def test_non_standard_nodes_looks_inside_subgraphs_and_functions() -> None:
    inner = raw_custom_graph().graph
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    if_node = helper.make_node("If", ["c"], ["y"], name="branch", then_branch=inner, else_branch=inner)
    model = helper.make_model(helper.make_graph([if_node], "g", [cond], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    assert [n.name for n in non_standard_nodes(model)] == ["custom0", "custom0"]


def test_parser_failure_lists_every_failing_node(rtx: str) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    nodes = [helper.make_node("Det", ["x"], ["d"], name="det_a"),
             helper.make_node("Relu", ["x"], ["r"], name="fine"),
             helper.make_node("Det", ["r"], ["e"], name="det_b"),
             helper.make_node("Add", ["d", "e"], ["y"], name="sum")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(BuildError) as info:
        build_engine(model, backend=rtx, progress=False)
    message = str(info.value)
    assert "node det_a (Det)" in message and "node det_b (Det)" in message and "fine" not in message
    assert "Remedy: map the op to supported ops at export, decompose it" in message


def test_bad_arguments_fail_before_building(rtx: str, conv_onnx: onnx.ModelProto, l2norm_onnx: onnx.ModelProto,
                                            tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="precision='int3' is not supported"):
        build_engine(conv_onnx, backend=rtx, precision="int3")
    with pytest.raises(InvalidInputError, match="plugins='magic' is not a plugin mode"):
        build_engine(conv_onnx, backend=rtx, plugins="magic")
    with pytest.raises(InvalidInputError, match="embed_plugins=True with plugin mode 'decompose' on tensorrt_rtx"):
        build_engine(l2norm_onnx, backend=rtx, plugins="decompose", embed_plugins=True)
    with pytest.raises(InvalidInputError, match=r"profile 0 names inputs \['y'\] the graph does not have"):
        build_engine(conv_onnx, backend=rtx, profiles={"y": ((1, 3, 8, 8),) * 3})
    with pytest.raises(InvalidInputError, match=r"input 'x': dim 2 ranges 8..16.*static size 8"):
        build_engine(conv_onnx, backend=rtx, profiles={"x": ((1, 3, 8, 8), (1, 3, 8, 8), (1, 3, 16, 8))})
    with pytest.raises(InvalidInputError, match="ONNX file .* does not exist"):
        build_engine(tmp_path / "missing.onnx", backend=rtx)
    with pytest.raises(InvalidInputError, match="backend='tensorrt_llm' is not a known backend"):
        build_engine(conv_onnx, backend="tensorrt_llm")


def test_missing_tensorrt_names_the_pip_extra(conv_onnx: onnx.ModelProto) -> None:
    try:
        load_backend("tensorrt")
    except MissingDependencyError:
        pass
    else:
        pytest.skip("full TensorRT is installed here")
    with pytest.raises(MissingDependencyError, match=r"pip install 'torchtrt_ext\[trt\]'"):
        build_engine(conv_onnx, backend="tensorrt")


def test_stub_only_tensorrt_is_reported_as_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """tensorrt-stubs installs tensorrt/__init__.pyi: `import tensorrt` then gives an empty namespace package."""
    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("a tensorrt package is importable here")
    (tmp_path / "tensorrt").mkdir()
    (tmp_path / "tensorrt" / "__init__.pyi").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)  # the namespace package import must not leak
    load_backend.cache_clear()
    try:
        with pytest.raises(MissingDependencyError, match="only type stubs or a placeholder are installed"):
            load_backend("tensorrt")
    finally:
        load_backend.cache_clear()
        sys.modules.pop("tensorrt", None)


def test_tensorrt_messages_reach_python_logging(rtx: str, caplog: pytest.LogCaptureFixture) -> None:
    api = load_backend(rtx)
    logger = api.logger()
    assert api.logger() is logger  # one for the process: TensorRT ignores a second while the first is in use
    with caplog.at_level(logging.DEBUG, logger="torchtrt_ext"), api.messages() as records:
        logger.log(api.trt.ILogger.Severity.WARNING, "layer foo falls back to a slow kernel")
        logger.log(api.trt.ILogger.Severity.INFO, "just information")
    logger.log(api.trt.ILogger.Severity.ERROR, "after the collection closed")
    assert records == [("WARNING", "layer foo falls back to a slow kernel")]
    levels = {r.getMessage(): r.levelno for r in caplog.records}
    assert levels["TensorRT: layer foo falls back to a slow kernel"] == logging.WARNING
    assert levels["TensorRT: just information"] == logging.DEBUG


def test_engine_metadata_survives_save_and_load_byte_for_byte(rtx: str, conv_onnx: onnx.ModelProto,
                                                              tmp_path: Path) -> None:
    engine = build_engine(conv_onnx, backend=rtx, profiles=TWO_PROFILES, progress=False,
                          output_tree={"type": "tensor", "index": 0})
    first = engine.save(tmp_path / "a.engine")
    loaded = Engine.load(first)
    assert loaded.metadata == engine.metadata
    assert loaded.metadata_bytes == engine.metadata_bytes == loaded.metadata.canonical_bytes()
    assert loaded.plan == engine.plan
    second = loaded.save(tmp_path / "b.engine")
    assert first.read_bytes() == second.read_bytes()


def test_tensorrt_10_builds_strongly_typed_without_precision_flags() -> None:
    """Stand-in modules with TensorRT 10.13's and 11.1's enums (NvInfer.h): on 10.x the network is created
    STRONGLY_TYPED (kSTRONGLY_TYPED = 1 there), so no FP16 flag and no deprecated layer.precision pins are needed and
    precision='as_exported' runs the exported types; on 11.x (kSTRONGLY_TYPED = 0, deprecated, no FP16 flag) no flag."""
    import enum
    import types

    from torchtrt_ext.backend.adapter import TRTApi

    class Flags10(enum.IntEnum):
        EXPLICIT_BATCH = 0
        STRONGLY_TYPED = 1

    class Flags11(enum.IntEnum):
        STRONGLY_TYPED = 0

    trt10 = types.SimpleNamespace(BuilderFlag=types.SimpleNamespace(FP16=0, BF16=17, OBEY_PRECISION_CONSTRAINTS=10),
                                  NetworkDefinitionCreationFlag=Flags10)
    trt11 = types.SimpleNamespace(BuilderFlag=types.SimpleNamespace(TF32=1), NetworkDefinitionCreationFlag=Flags11)
    assert TRTApi("tensorrt", trt10).network_flags() == 1 << 1
    assert TRTApi("tensorrt", trt11).network_flags() == 0
    assert not hasattr(TRTApi, "precision_flags")  # weak-typing flags are never set any more
    assert TRTApi("tensorrt", trt10).capture_flags(None) == []  # no network needed: never on TensorRT


def test_tensorrt_rtx_engines_are_built_for_stream_capture(rtx: str, conv_onnx: onnx.ModelProto,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """RTX needs REQUIRE_USER_ALLOCATION for CUDA stream capture (RTX 1.2 release notes): the real builder gets it and
    builds; the network is created with no (deprecated) typing flag."""
    api = load_backend(rtx)
    flag = api.trt.BuilderFlag.REQUIRE_USER_ALLOCATION
    assert api.network_flags() == 0
    seen: list[object] = []
    original = api.trt.IBuilderConfig.set_flag

    def spy(config: object, value: object) -> None:
        seen.append(value)
        original(config, value)

    monkeypatch.setattr(api.trt.IBuilderConfig, "set_flag", spy)
    engine = build_engine(conv_onnx, backend=rtx, progress=False, precision="fp16")
    assert flag in seen and len(engine.plan) > 10_000


class NmsHead(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from torchtrt_ext.ops.efficient_nms import efficient_nms

        return efficient_nms(boxes, scores, max_output_boxes=5)


def test_rtx_requires_user_allocation_only_where_the_network_can_be_captured(rtx: str,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """RTX fails a build with data-dependent shapes under REQUIRE_USER_ALLOCATION (its BuilderFlag docs), and such an
    engine cannot be captured anyway: the decomposed EfficientNMS (ONNX NonMaxSuppression -> an NMS layer) and a
    NonZero network get no flag; with our NMS plugin (fixed-size outputs) the engine gets it and builds. Real RTX
    parser, network and builder (RTX 1.7 here has no NMS/NonZero kernels at all, so those two cannot build either
    way on this machine)."""
    from torchtrt_ext.backend.builder import graph_for_build, network_from_onnx, plan_build
    from torchtrt_ext.backend.options import BuildOptions

    try:
        _native.plugin_library_path()
    except LibraryNotFoundError as exc:
        pytest.skip(f"the C++ plugin library is not built here: {exc}")
    api = load_backend(rtx)
    flag = api.trt.BuilderFlag.REQUIRE_USER_ALLOCATION
    exported = torchtrt_ext.export_onnx(NmsHead(), (torch.rand(1, 8, 4), torch.rand(1, 8, 3)), exporter="legacy")
    flags = {}
    for mode in ("decompose", "cpp"):
        build = plan_build(exported, BuildOptions.of(backend=rtx, plugins=mode))
        with api.messages() as records:
            _, network = network_from_onnx(api, graph_for_build(build).model, build.plan, api.logger(), records)
            flags[mode] = api.capture_flags(network)
    assert flags == {"decompose": [], "cpp": [flag]}
    builder = api.trt.Builder(api.logger())
    network = builder.create_network(0)
    network.mark_output(network.add_non_zero(network.add_input("x", api.trt.float32, (-1, 4))).get_output(0))
    assert api.capture_flags(network) == []
    seen: list[object] = []
    original = api.trt.IBuilderConfig.set_flag
    monkeypatch.setattr(api.trt.IBuilderConfig, "set_flag", lambda config, value: seen.append(value) or
                        original(config, value))
    engine = build_engine(exported, backend=rtx, plugins="cpp", progress=False)
    assert flag in seen and engine.metadata.plugin_mode == "cpp"
