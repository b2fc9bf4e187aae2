"""An op bound to a plugin TensorRT itself provides (namespace "", version "1", provider "tensorrt"): it exports with
that binding, decomposes, is planned per op next to our own ops, and is recorded per op in the engine metadata."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext import _native
from torchtrt_ext.cli.inspect import engine_table
from tests.helpers import ConvL2Norm, node_attrs, rel_err, run_onnx, stand_in_tensorrt
from torchtrt_ext.backend import plugins
from torchtrt_ext.backend.adapter import TRTApi, load_backend
from torchtrt_ext.backend.engine import Engine, EngineMetadata
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.backend.plugin_plan import OpPlan
from torchtrt_ext.errors import BuildError, LibraryNotFoundError
from torchtrt_ext.ops import PROVIDER_OURS, PROVIDER_TENSORRT, Decomposer, OpSpec, PluginRef, define_op


def _decompose(d: Decomposer, inputs: list[str], outputs: list[str]) -> None:
    d.op("Relu", inputs[0], out=outputs[0])


# A stand-in name: TensorRT ships no plugin called TestRelu_TRT; the binding is what is under test.
RELU_TRT = define_op(OpSpec(
    name="TestRelu_TRT", inputs=("x",), outputs=("y",), attrs=(), eager=torch.relu,
    shape_rule=lambda shapes, dtypes: [(shapes[0], dtypes[0])], decompose=_decompose,
    plugin=PluginRef("TestRelu_TRT", "1", "", PROVIDER_TENSORRT), doc="relu, served by TensorRT's plugin library"))


class WithBoth(torch.nn.Module):
    """Our L2Norm and the TensorRT-provided op in one graph."""

    def __init__(self) -> None:
        super().__init__()
        self.head = ConvL2Norm()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return RELU_TRT(self.head(x) - 0.1)


def _stand_in_tensorrt(with_plugin_library: bool) -> TRTApi:
    """A stand-in TensorRT (our orchestration only) whose own plugin library registers TestRelu_TRT 1, or which has
    no plugin library at all."""
    return TRTApi("tensorrt", stand_in_tensorrt({("TestRelu_TRT", "1", "")} if with_plugin_library else None))


@pytest.fixture(scope="module")
def exported() -> onnx.ModelProto:
    torch.manual_seed(0)
    return torchtrt_ext.export_onnx(WithBoth().eval(), (torch.randn(2, 3, 8, 8),))


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_both_exporters_write_the_tensorrt_binding(exporter: str) -> None:
    model = torchtrt_ext.export_onnx(WithBoth().eval(), (torch.randn(2, 3, 8, 8),), exporter=exporter)
    (node,) = [n for n in model.graph.node if n.op_type == "TestRelu_TRT"]
    assert node.domain == "torchtrt_ext"
    assert node_attrs(node) == {"plugin_version": b"1", "plugin_namespace": b""}


def test_it_decomposes(exported: onnx.ModelProto) -> None:
    portable = torchtrt_ext.passes.decompose_custom_ops(exported)
    assert not [n for n in portable.graph.node if n.domain == "torchtrt_ext"]
    x = torch.randn(3, 3, 8, 8)
    torch.manual_seed(0)
    reference = WithBoth().eval()
    (got,) = run_onnx(portable, {"x": x})
    assert rel_err(got, reference(x).detach()) < 1e-6


def test_planned_per_op_and_provider(exported: onnx.ModelProto, cpp_library: Path) -> None:
    plan = plugins.resolve_plugin_plan("auto", _stand_in_tensorrt(True), exported)
    routes = {(op.plugin.name, op.plugin.namespace, op.plugin.provider): op.route for op in plan.ops}
    assert routes == {("L2Norm", "torchtrt_ext", PROVIDER_OURS): "cpp", ("TestRelu_TRT", "", PROVIDER_TENSORRT): "tensorrt"}
    assert plan.mode == "cpp" and plan.library == cpp_library
    assert plan.plugin_ids == ("::TestRelu_TRT:1", "torchtrt_ext::L2Norm:1")


def test_auto_decomposes_it_where_tensorrt_has_no_plugin_library(exported: onnx.ModelProto,
                                                                  cpp_library: Path) -> None:
    plan = plugins.resolve_plugin_plan("auto", _stand_in_tensorrt(False), exported)
    assert {op.op_type: op.route for op in plan.ops} == {"L2Norm": "cpp", "TestRelu_TRT": "decompose"}
    prepared = plugins.prepare_graph(exported, plan)
    assert [n.op_type for n in prepared.graph.node if n.domain == "torchtrt_ext"] == ["L2Norm"]
    with pytest.raises(BuildError, match="needs plugin ::TestRelu_TRT:1 from TensorRT's own plugin library"):
        plugins.resolve_plugin_plan("cpp", _stand_in_tensorrt(False), exported)


def test_decompose_mode_decomposes_both(exported: onnx.ModelProto) -> None:
    plan = plugins.resolve_plugin_plan("decompose", _stand_in_tensorrt(True), exported)
    assert plan.mode == "decompose" and {op.route for op in plan.ops} == {"decompose"} and not plan.needs_plugins


def test_recorded_per_op_in_a_real_engine(rtx: str, exported: onnx.ModelProto, tmp_path: Path) -> None:
    """TensorRT-RTX (real builder) registers no TestRelu_TRT creator, so that op is decomposed, while L2Norm takes our
    C++ plugin where the library is built (else it is decomposed too); the engine file says so per op."""
    try:
        _native.plugin_library_path()
        ours = "cpp"
    except LibraryNotFoundError:
        ours = "decompose"
    engine = torchtrt_ext.build_engine(exported, backend=rtx, progress=False)
    path = engine.save(tmp_path / "both.engine")
    ops = {op.op_type: op for op in Engine.load(path).metadata.plugin_plan.ops}
    assert ops["TestRelu_TRT"] == OpPlan(PluginRef("TestRelu_TRT", "1", "", PROVIDER_TENSORRT), "decompose")
    assert ops["L2Norm"] == OpPlan(PluginRef("L2Norm", "1", "torchtrt_ext", PROVIDER_OURS), ours)
    table = engine_table(Engine.load(path).metadata)  # what torchtrt-ext inspect prints for the engine
    assert "plugin ::TestRelu_TRT:1 (tensorrt): decompose" in table.splitlines()


def test_the_metadata_record_is_read_back_by_one_function(exported: onnx.ModelProto, cpp_library: Path) -> None:
    plan = plugins.resolve_plugin_plan("auto", _stand_in_tensorrt(True), exported)
    metadata = EngineMetadata(inputs=(), outputs=(), profiles=(), options=BuildOptions(),
                              target=Target("tensorrt", "10.13.0", plugin_library_sha256=plan.library_sha256),
                              plugin_plan=dataclasses.replace(plan, library=None, library_sha256=None))
    again = EngineMetadata.from_json(metadata.to_json())
    assert again.plugin_plan.ops == plan.ops and again.plugins == plan.plugin_ids and again.plugin_mode == plan.mode
    read = plugins.plan_from_metadata(again)
    assert read.ops == plan.ops and read.library == cpp_library and read.library_sha256 == plan.library_sha256


def test_tensorrt_rtx_real_registry_is_asked_per_plugin(rtx: str) -> None:
    """TensorRT-RTX's real init_libnvinfer_plugins and registry: it registers ROIAlign_TRT 2 (an IPluginCreatorV3One,
    which its parser imports) but no EfficientNMS_TRT, so an op bound to the latter is decomposed there."""
    api = load_backend(rtx)
    assert api.tensorrt_plugin_creator("ROIAlign_TRT", "2", "") is not None
    assert api.tensorrt_plugin_creator("EfficientNMS_TRT", "1", "") is None
