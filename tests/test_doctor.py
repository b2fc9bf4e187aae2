"""The doctor: unsupported nodes with their remedies, custom nodes with and without plugins, clean graphs, Q/DQ."""
from __future__ import annotations

import importlib.util
import io
import json
import warnings

import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper

import torchtrt_ext.ops  # noqa: F401  (defines L2Norm)
from torchtrt_ext import _native
from torchtrt_ext.errors import LibraryNotFoundError
from torchtrt_ext.ops.spec import get_op
from torchtrt_ext.doctor import trt_op_support
from torchtrt_ext.doctor import report

HAS_RTX = importlib.util.find_spec("tensorrt_rtx") is not None
needs_rtx = pytest.mark.skipif(not HAS_RTX, reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
# (backend, checker): the table always; TensorRT-RTX's own parser where it is installed
CHECKS = [("tensorrt", "table"), ("tensorrt_rtx", "table"),
          pytest.param("tensorrt_rtx", "parser", marks=needs_rtx)]


def export(module: torch.nn.Module, x: torch.Tensor, opset: int = 17) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), buffer, dynamo=False, opset_version=opset, input_names=["x"])
    return onnx.load_from_string(buffer.getvalue())


def _graph(nodes, inputs, outputs, opset=17, custom=False) -> onnx.ModelProto:
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("torchtrt_ext", 1)] if custom else [])
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs), opset_imports=imports)


def _with_unique_and_l2norm() -> onnx.ModelProto:
    """x -> L2Norm -> Relu -> y, and x -> Unique -> u (Unique: rejected by TensorRT)."""
    nodes = [get_op("L2Norm").spec.make_node(["x"], ["n"], name="norm", axis=1, eps=1e-6),
             helper.make_node("Relu", ["n"], ["y"], name="relu"),
             helper.make_node("Unique", ["x"], ["u"], name="unique")]
    return _graph(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2, 8])],
                  [helper.make_tensor_value_info("y", T.FLOAT, [2, 8]), helper.make_tensor_value_info("u", T.FLOAT, None)],
                  custom=True)


@pytest.fixture
def no_plugin_library(monkeypatch):
    def missing():
        raise LibraryNotFoundError("libtorchtrt_ext_plugins.so not found. Expected: it. Remedy: build it")
    monkeypatch.setattr(_native, "plugin_library_path", missing)
    import torchtrt_ext.backend.adapter as adapter
    monkeypatch.setattr(adapter, "backend_available", lambda name: name != "tensorrt" and HAS_RTX)


@pytest.fixture
def plugin_library(monkeypatch, tmp_path):
    library = tmp_path / "libtorchtrt_ext_plugins.so"
    library.write_bytes(b"")
    monkeypatch.setattr(_native, "plugin_library_path", lambda: library)
    return library


@pytest.mark.parametrize("backend,checker", CHECKS)
def test_unsupported_node_is_listed_with_remedies_in_order(backend, checker, no_plugin_library):
    result = report(_with_unique_and_l2norm(), backend, checker=checker)
    assert not result.ok
    unique = next(f for f in result.findings if f.op_type == "Unique")
    assert unique.problem and unique.node == "unique" and unique.status == "unsupported"
    first, export_, decompose, plugin = unique.remedies
    assert "newer TensorRT" in first
    assert "mapping at export" in export_ and "torch.unique" in export_
    assert decompose.startswith("decomposition") and plugin.startswith("a plugin")
    assert "relu" not in {f.node for f in result.findings}
    assert result.native_ops == {"Relu": 1}
    checked = result.checked_with
    assert ("ONNX parser" in checked) if checker == "parser" else ("op-support table" in checked)
    table = result.to_table()
    assert "unique" in table and "1. a newer TensorRT" in table and "4. a plugin" in table
    data = json.loads(result.to_json())
    assert data["ok"] is False and {f["op_type"] for f in data["findings"]} == {"Unique", "L2Norm"}


def test_custom_node_without_plugin_library_is_a_problem_with_decomposition_remedy(no_plugin_library):
    result = report(_with_unique_and_l2norm(), "tensorrt", checker="table")
    l2norm = next(f for f in result.findings if f.op_type == "L2Norm")
    assert l2norm.problem and l2norm.status == "plugin missing" and l2norm.domain == "torchtrt_ext"
    assert "C++ plugin library" in l2norm.remedies[-1] and "Python plugins" in l2norm.remedies[-1]
    assert "decompose_custom_ops" in l2norm.remedies[2]
    assert "plugin L2Norm v1 (torchtrt_ext)" in l2norm.detail


def test_custom_node_with_plugin_library_is_reported_available(plugin_library):
    result = report(_with_unique_and_l2norm(), "tensorrt", checker="table")
    l2norm = next(f for f in result.findings if f.op_type == "L2Norm")
    assert not l2norm.problem and l2norm.status == "plugin available" and str(plugin_library) in l2norm.detail
    assert [f.op_type for f in result.problems] == ["Unique"]


def test_tensorrt_rtx_counts_on_the_cpp_plugin_library_only(no_plugin_library):
    result = report(_with_unique_and_l2norm(), "tensorrt_rtx", checker="table")
    l2norm = next(f for f in result.findings if f.op_type == "L2Norm")
    assert l2norm.problem and "TensorRT-RTX does not take the Python plugins" in l2norm.detail
    assert "decompose_custom_ops" in l2norm.remedies[1] and "build the C++ plugin library" in l2norm.remedies[-1]


def test_tensorrt_rtx_with_the_plugin_library_reports_it_available(plugin_library):
    result = report(_with_unique_and_l2norm(), "tensorrt_rtx", checker="table")
    l2norm = next(f for f in result.findings if f.op_type == "L2Norm")
    assert not l2norm.problem and str(plugin_library) in l2norm.detail


def test_other_custom_domains_are_reported():
    nodes = [helper.make_node("FancyOp", ["x"], ["y"], name="fancy", domain="com.example")]
    model = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                                                [helper.make_tensor_value_info("y", T.FLOAT, [2])]),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    result = report(model, "tensorrt", checker="table")
    assert [(f.node, f.status, f.domain) for f in result.problems] == [("fancy", "unknown custom op", "com.example")]


@needs_rtx
def test_parser_sees_a_copy_without_custom_nodes_and_the_fused_graph_is_fine(no_plugin_library):
    """L2Norm sits between two standard ops: the parser still checks Relu after it (the cut keeps types)."""
    model = _with_unique_and_l2norm()
    result = report(model, "tensorrt_rtx", checker="parser")
    assert {f.op_type for f in result.problems} == {"Unique", "L2Norm"}
    assert len(model.graph.node) == 3, "the input model is not modified"


@pytest.mark.parametrize("backend,checker", CHECKS)
def test_a_clean_graph_has_nothing_to_report(backend, checker):
    model = export(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                       torch.nn.Linear(144, 5)), torch.randn(1, 3, 8, 8))
    result = report(model, backend, checker=checker)
    assert result.ok and not result.findings
    assert "nothing to report" in result.to_table()
    assert json.loads(result.to_json())["findings"] == []


class FakeQuantConv(torch.nn.Module):
    """A conv whose weight is fake-quantized per output channel (INT8, symmetric)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.register_buffer("scale", torch.rand(8) * 0.01 + 0.001)
        self.register_buffer("zero_point", torch.zeros(8, dtype=torch.int32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.fake_quantize_per_channel_affine(self.conv.weight, self.scale, self.zero_point, 0, -128, 127)
        return torch.nn.functional.conv2d(x, w, self.conv.bias)


@pytest.mark.parametrize("backend,checker", CHECKS)
def test_per_channel_fake_quant_conv_is_native_qdq(backend, checker):
    model = export(FakeQuantConv(), torch.randn(1, 3, 8, 8), opset=17)
    qdq = [n for n in model.graph.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")]
    assert len(qdq) == 2
    assert all(helper.get_attribute_value(next(a for a in n.attribute if a.name == "axis")) == 0 for n in qdq)
    scale = next(i for i in model.graph.initializer if i.name == qdq[0].input[1])
    assert list(scale.dims) == [8], "per-axis scale: one per output channel"
    result = report(model, backend, checker=checker)
    assert result.ok and not result.findings, result.to_table()
    assert result.native_ops["QuantizeLinear"] == 1 and result.native_ops["DequantizeLinear"] == 1


def test_newer_opset_and_unknown_ops_point_to_a_newer_tensorrt_or_lower_opset():
    nodes = [helper.make_node("RMSNormalization", ["x", "s"], ["y"], name="rms", axis=-1)]
    model = _graph(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [2, 4]),
                           helper.make_tensor_value_info("s", T.FLOAT, [4])],
                   [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])], opset=23)
    result = report(model, "tensorrt", checker="table")
    rms = next(f for f in result.problems if f.op_type == "RMSNormalization")
    assert "opset <= 20" in rms.remedies[0]
    assert any(f.status == "opset" for f in result.findings)


def test_the_table_agrees_with_tensorrt_rtx_on_sample_ops():
    """Spot check of the maintained table against a real parser (where installed)."""
    if not HAS_RTX:
        pytest.skip("tensorrt_rtx is not installed")
    for op in ("Unique", "BitShift"):
        assert trt_op_support.status(op) == "unsupported"
    model = _graph([helper.make_node("Cast", ["x"], ["i"], to=T.INT32),
                    helper.make_node("BitShift", ["i", "i"], ["y"], name="shift", direction="LEFT")],
                   [helper.make_tensor_value_info("x", T.FLOAT, [2])], [helper.make_tensor_value_info("y", T.INT32, [2])])
    assert [f.node for f in report(model, "tensorrt_rtx", checker="parser").problems] == ["shift"]


def test_bad_arguments_are_refused_with_the_allowed_values():
    from torchtrt_ext.errors import InvalidInputError

    model = _graph([], [helper.make_tensor_value_info("x", T.FLOAT, [2])], [helper.make_tensor_value_info("x", T.FLOAT, [2])])
    with pytest.raises(InvalidInputError, match="tensorrt_rtx"):
        report(model, "onnxruntime")
    with pytest.raises(InvalidInputError, match="checker"):
        report(model, "tensorrt", checker="guess")


def test_the_model_is_untouched_by_the_doctor():
    model = _with_unique_and_l2norm()
    before = model.SerializeToString()
    report(model, "tensorrt", checker="table")
    assert model.SerializeToString() == before


def test_a_tensorrt_without_tensorrt_plugin_is_not_reported_as_serving_the_python_plugins(no_plugin_library,
                                                                                        monkeypatch):
    """The doctor once saw an importable TensorRT and reported the Python plugins available without trying them: a
    stand-in TensorRT 10.3 (a Builder, no tensorrt.plugin) must now come out as 'plugin missing', with the reason."""
    import sys
    import types

    from torchtrt_ext.backend import adapter, plugins

    old = types.ModuleType("tensorrt")
    old.__version__ = "10.3.0"
    old.Builder = object
    monkeypatch.setitem(sys.modules, "tensorrt", old)
    monkeypatch.setitem(sys.modules, "tensorrt.plugin", None)
    monkeypatch.setattr(adapter, "backend_available", lambda name: name == "tensorrt")
    adapter.load_backend.cache_clear()
    plugins._register_python_once.cache_clear()
    try:
        result = report(_with_unique_and_l2norm(), "tensorrt", checker="table")
    finally:
        adapter.load_backend.cache_clear()
        plugins._register_python_once.cache_clear()
    l2norm = next(f for f in result.findings if f.op_type == "L2Norm")
    assert l2norm.problem and l2norm.status == "plugin missing"
    assert "tensorrt 10.3.0 has no tensorrt.plugin" in l2norm.detail


# ------------------------------------------------------------------- one routing policy for the build and the doctor
class _Nms(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        from torchtrt_ext.ops.efficient_nms import efficient_nms

        return efficient_nms(boxes, scores, max_output_boxes=5)


def _efficient_nms_model() -> onnx.ModelProto:
    """One EfficientNMS_TRT node: bound to TensorRT's own plugin, with ours as the fallback."""
    return torchtrt_ext.export_onnx(_Nms(), (torch.rand(1, 8, 4), torch.rand(1, 8, 3)), exporter="legacy")


ROUTED_MODELS = {"l2norm": _with_unique_and_l2norm, "efficient_nms": _efficient_nms_model}


@pytest.mark.parametrize("case", sorted(ROUTED_MODELS))
@pytest.mark.parametrize("library", [True, False], ids=["library", "no library"])
@pytest.mark.parametrize("backend", ["tensorrt", pytest.param("tensorrt_rtx", marks=needs_rtx)])
def test_the_build_and_the_doctor_route_every_node_alike(case, library, backend, monkeypatch, tmp_path):
    """The plan a build with plugins='auto' takes, per node, is the one the doctor reports, or the build raises the
    error of a node the doctor reports unserved. ``tensorrt``: a stand-in TRTApi whose plugin library registers
    EfficientNMS_TRT (our orchestration only); ``tensorrt_rtx``: the real one."""
    from torchtrt_ext.backend import adapter
    from torchtrt_ext.backend.adapter import TRTApi
    from torchtrt_ext.backend.plugin_plan import OpPlan, Unserved
    from torchtrt_ext.backend.plugins import resolve_plugin_plan
    from torchtrt_ext.errors import TorchTRTExtError
    from tests.helpers import stand_in_tensorrt

    if library:
        (tmp_path / "libtorchtrt_ext_plugins.so").write_bytes(b"")
        monkeypatch.setattr(_native, "plugin_library_path", lambda: tmp_path / "libtorchtrt_ext_plugins.so")
    else:
        def missing():
            raise LibraryNotFoundError("libtorchtrt_ext_plugins.so not found. Expected: it. Remedy: build it")
        monkeypatch.setattr(_native, "plugin_library_path", missing)
    if backend == "tensorrt":
        api = TRTApi("tensorrt", stand_in_tensorrt({("EfficientNMS_TRT", "1", "")}))
        monkeypatch.setattr(adapter, "backend_available", lambda name: True)
        monkeypatch.setattr(adapter, "load_backend", lambda name: api)
    else:
        api = adapter.load_backend(backend)
    model = ROUTED_MODELS[case]()
    nodes = [n for n in model.graph.node if n.domain == "torchtrt_ext"]
    doctor = report(model, backend, checker="table").routes
    assert nodes and set(doctor) == {n.name for n in nodes}
    try:
        plan = resolve_plugin_plan("auto", api, model)
    except TorchTRTExtError as exc:
        unserved = [r for r in doctor.values() if isinstance(r, Unserved)]
        assert str(exc) in {str(r.error) for r in unserved}
        return
    built = {op.op_type: op for op in plan.ops}
    for node in nodes:
        ours, theirs = doctor[node.name], built[node.op_type]
        assert isinstance(ours, OpPlan) and (ours, ours.how) == (theirs, theirs.how), node.name
