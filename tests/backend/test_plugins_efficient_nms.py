"""EfficientNMS_TRT is bound to TensorRT's own plugin, with ours as the fallback where TensorRT's plugin library does
not exist: how plugins= plans it per backend (stand-in TRTApi objects test our orchestration only; what TensorRT-RTX's
real builder does with the result is tested where RTX takes plugins)."""
from __future__ import annotations

import types
from pathlib import Path

import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext import _native
from tests.helpers import node_attrs, stand_in_tensorrt
from torchtrt_ext.backend import plugins
from torchtrt_ext.backend.adapter import TRTApi
from torchtrt_ext.backend.options import BuildOptions
from torchtrt_ext.backend.plugin_plan import OpPlan
from torchtrt_ext.errors import LibraryNotFoundError
from torchtrt_ext.ops import PROVIDER_OURS, PROVIDER_TENSORRT, PluginRef
from torchtrt_ext.ops.efficient_nms import efficient_nms

THEIRS = PluginRef("EfficientNMS_TRT", "1", "", PROVIDER_TENSORRT)
OURS = PluginRef("EfficientNMS_TRT", "1", "torchtrt_ext", PROVIDER_OURS)


class Head(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return efficient_nms(boxes, scores, max_output_boxes=5)


@pytest.fixture(scope="module")
def exported() -> onnx.ModelProto:
    return torchtrt_ext.export_onnx(Head(), (torch.rand(1, 8, 4), torch.rand(1, 8, 3)), exporter="legacy")


@pytest.fixture
def no_cpp_library(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Path:
        raise LibraryNotFoundError("libtorchtrt_ext_plugins.so not found")

    monkeypatch.setattr(_native, "plugin_library_path", missing)


def stand_in(with_plugin_library: bool) -> TRTApi:
    """A stand-in TensorRT (our orchestration only) whose own plugin library registers EfficientNMS_TRT 1, or which has
    no plugin library at all."""
    return TRTApi("tensorrt", stand_in_tensorrt({("EfficientNMS_TRT", "1", "")} if with_plugin_library else None))


def test_tensorrts_plugin_where_tensorrt_has_it(exported: onnx.ModelProto, cpp_library: Path) -> None:
    plan = plugins.resolve_plugin_plan("auto", stand_in(True), exported)
    assert plan.ops == (OpPlan(THEIRS, "tensorrt"),) and plan.library is None
    prepared = plugins.prepare_graph(exported, plan)
    assert prepared.graph == exported.graph  # the node already names TensorRT's namespace ""
    assert exported.functions and not prepared.functions  # a parser preferring the function cannot take it


@pytest.mark.parametrize("mode", ["auto", "cpp"])
def test_our_plugin_where_tensorrts_library_is_missing(mode: str, exported: onnx.ModelProto,
                                                        cpp_library: Path) -> None:
    plan = plugins.resolve_plugin_plan(mode, stand_in(False), exported)
    assert plan.ops == (OpPlan(OURS, "cpp"),) and plan.library == cpp_library and plan.mode == "cpp"
    assert plan.plugin_ids == ("torchtrt_ext::EfficientNMS_TRT:1",)
    (node,) = [n for n in plugins.prepare_graph(exported, plan).graph.node if n.domain == "torchtrt_ext"]
    assert node_attrs(node)["plugin_namespace"] == b"torchtrt_ext"  # the parser finds our creator
    assert node_attrs([n for n in exported.graph.node if n.domain][0])["plugin_namespace"] == b""  # input untouched


def test_without_either_library_auto_decomposes_and_cpp_says_what_to_build(exported: onnx.ModelProto,
                                                                           no_cpp_library: None) -> None:
    plan = plugins.resolve_plugin_plan("auto", stand_in(False), exported)
    assert plan.ops == (OpPlan(THEIRS, "decompose"),)
    assert "NonMaxSuppression" in {n.op_type for n in plugins.prepare_graph(exported, plan).graph.node}
    with pytest.raises(LibraryNotFoundError):
        plugins.resolve_plugin_plan("cpp", stand_in(False), exported)


def test_the_doctor_names_the_route_auto_takes(cpp_library: Path) -> None:
    assert plugins.route(THEIRS, "auto", stand_in(True)) == OpPlan(THEIRS, "tensorrt")
    planned = plugins.route(THEIRS, "auto", stand_in(False))
    assert isinstance(planned, OpPlan) and planned.route == "cpp"
    assert "torchtrt_ext::EfficientNMS_TRT:1" in planned.how and str(cpp_library) in planned.how


def test_tensorrt_rtx_has_no_tensorrt_plugin_library() -> None:
    """Real TensorRT-RTX: init_libnvinfer_plugins exists and returns True, yet registers no EfficientNMS_TRT, so the
    adapter finds no such creator there (our fallback, or the decomposition, serves the op)."""
    trt = pytest.importorskip("tensorrt_rtx", reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
    from torchtrt_ext.backend.adapter import load_backend

    assert trt.init_libnvinfer_plugins(trt.Logger(trt.Logger.ERROR), "")
    assert trt.get_plugin_registry().get_creator("EfficientNMS_TRT", "1", "") is None
    assert load_backend("tensorrt_rtx").tensorrt_plugin_creator("EfficientNMS_TRT", "1", "") is None


class NormThenNms(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return efficient_nms(torchtrt_ext.nn.L2Norm(2)(boxes), scores, max_output_boxes=5)


def test_embedding_beside_tensorrts_own_plugin_is_refused_before_the_build(cpp_library: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """On TensorRT, embedding makes a version-compatible engine, which carries our library only and cannot use
    TensorRT's libnvinfer_plugin: with EfficientNMS_TRT served by TensorRT's plugin beside our L2Norm, the build is
    refused with the reason (stand-in TensorRT: our orchestration only)."""
    from torchtrt_ext.backend import builder
    from torchtrt_ext.errors import InvalidInputError

    module = stand_in_tensorrt({("EfficientNMS_TRT", "1", "")})
    module.BuilderFlag = types.SimpleNamespace(VERSION_COMPATIBLE=1)  # type: ignore[attr-defined]
    module.IBuilderConfig = type("IBuilderConfig", (), {"plugins_to_serialize": None})  # type: ignore[attr-defined]
    api = TRTApi("tensorrt", module)
    monkeypatch.setattr(builder, "load_backend", lambda name: api)
    model = torchtrt_ext.export_onnx(NormThenNms(), (torch.rand(1, 8, 4), torch.rand(1, 8, 3)), exporter="legacy")
    assert {op.route for op in builder.plan_build(model, BuildOptions.of(plugins="cpp")).plan.ops} == {"cpp", "tensorrt"}
    with pytest.raises(InvalidInputError, match=r"version-compatible engine that carries our plugin library only, and "
                       r"\['EfficientNMS_TRT'\].*libnvinfer_vc_plugin.*Remedy: drop embed_plugins"):
        builder.plan_build(model, BuildOptions.of(plugins="cpp", embed_plugins=True))
    rtx_like = TRTApi("tensorrt_rtx", module)  # RTX embeds without making the engine version-compatible
    assert api.embedding_is_version_compatible and not rtx_like.embedding_is_version_compatible
