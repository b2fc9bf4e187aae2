"""The doctor says what the build will do (issue 33, item 12): every plugin node parsed as the build parses it (the
same routing, the same parse step on TensorRT-RTX's real parser with our C++ library, whose creators check the
attributes), one row per node, one remedy block per distinct cause, graph errors named as such, and an exit status
of ``torchtrt-ext inspect`` that says whether the build would succeed."""
from __future__ import annotations

import importlib.util

import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper

import torchtrt_ext
from torchtrt_ext import _native, cli
from torchtrt_ext.doctor import report
from torchtrt_ext.errors import ExitCode, LibraryNotFoundError, MissingDependencyError, OnnxParseError
from torchtrt_ext.ops.spec import get_op


def _library_reason() -> str | None:
    if importlib.util.find_spec("tensorrt_rtx") is None:
        return "tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')"
    try:
        _native.plugin_library_path()
    except LibraryNotFoundError as exc:
        return f"the C++ plugin library is not built: {exc.remedy}"
    return None


needs_rtx_and_library = pytest.mark.skipif(_library_reason() is not None, reason=str(_library_reason()))


def _vi(name: str, shape: list[int] | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, T.FLOAT, [2, 8] if shape is None else shape)


def _model(nodes: list[onnx.NodeProto], outputs: list[str]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [_vi("x")], [_vi(o) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("torchtrt_ext", 1)])


def _set(node: onnx.NodeProto, **attrs: float) -> onnx.NodeProto:
    """``node`` with attributes overwritten past the op's own checks (a hand-edited or foreign ONNX file)."""
    for attr in node.attribute:
        if attr.name in attrs:
            attr.f = attrs[attr.name]
    return node


def _l2norm(name: str, source: str, target: str, eps: float) -> onnx.NodeProto:
    return _set(get_op("L2Norm").spec.make_node([source], [target], name=name, axis=1, eps=1e-6), eps=eps)


class _Nms(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torchtrt_ext.ops.efficient_nms(boxes, scores, max_output_boxes=5)


@needs_rtx_and_library
def test_an_attribute_our_nms_plugin_refuses_is_reported_with_its_message() -> None:
    """The build exits 4 quoting our plugin; the doctor used to say '0 problems, plugin available'."""
    model = torchtrt_ext.export_onnx(_Nms(), (torch.rand(1, 8, 4), torch.rand(1, 8, 3)), exporter="legacy")
    (nms,) = [n for n in model.graph.node if n.op_type == "EfficientNMS_TRT"]
    _set(nms, iou_threshold=7.0)
    with pytest.raises(OnnxParseError, match="iou_threshold"):
        torchtrt_ext.build_engine(model, backend="tensorrt_rtx", progress=False)
    result = report(model, "tensorrt_rtx")
    (row,) = [f for f in result.findings if f.node == nms.name]
    assert row.problem and row.status == "plugin rejected", result.to_table()
    assert "field 'iou_threshold' is 7" in row.detail and "[0, 1]" in row.detail
    assert not result.ok and not result.builds


@needs_rtx_and_library
def test_a_refused_l2norm_is_one_row_with_our_plugins_message() -> None:
    result = report(_model([_l2norm("norm", "x", "y", 0.0)], ["y"]), "tensorrt_rtx")
    rows = [f for f in result.findings if f.node == "norm"]
    assert len(rows) == 1, result.to_table()
    assert rows[0].status == "plugin rejected" and "field 'eps' is 0" in rows[0].detail
    assert "eps" in rows[0].remedies[0] and not any(r.startswith("a plugin") for r in rows[0].remedies)


@needs_rtx_and_library
def test_every_refused_node_is_found_and_one_cause_gets_one_remedy_block() -> None:
    """The parser stops at its first error; the doctor goes on past it, and says a shared remedy once."""
    nodes = [_l2norm("n1", "x", "a", 0.0), helper.make_node("Relu", ["a"], ["b"], name="relu"),
             _l2norm("n2", "b", "y", 0.0)]
    result = report(_model(nodes, ["y"]), "tensorrt_rtx")
    assert [f.node for f in result.problems] == ["n1", "n2"], result.to_table()
    table = result.to_table()
    assert table.count("1. ") == 1 and "n1, n2 (L2Norm):" in table, table


def test_a_dangling_input_is_an_invalid_graph_not_an_unsupported_op() -> None:
    model = _model([helper.make_node("Relu", ["z"], ["y"], name="relu")], ["y"])
    for backend in ("tensorrt", "tensorrt_rtx"):
        result = report(model, backend, checker="table")
        (row,) = result.problems
        assert (row.node, row.status) == ("relu", "invalid graph") and "'z'" in row.detail
        assert "plugin" not in " ".join(row.remedies) and "onnx.checker" in " ".join(row.remedies)
    if importlib.util.find_spec("tensorrt_rtx") is not None:
        (row,) = report(model, "tensorrt_rtx", checker="parser").findings  # one row: the parser agrees
        assert row.status == "invalid graph"


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_rtx") is None, reason="tensorrt_rtx is not installed")
def test_a_parser_error_without_a_node_is_a_graph_error() -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [_vi("x")],
                              [_vi("y"), _vi("w")])  # "w": an output nothing produces
    result = report(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "tensorrt_rtx")
    (row,) = result.problems
    assert row.node == "<model>" and row.status == "parse error" and row.op_type == "graph"
    table = result.to_table()
    assert "#-1" not in table and "(?)" not in table and "TensorRT TensorRT" not in table


def test_the_table_remedy_names_its_tensorrt_once() -> None:
    model = _model([helper.make_node("RMSNormalization", ["x"], ["y"], name="rms")], ["y"])
    (row,) = report(model, "tensorrt", checker="table").problems
    assert "TensorRT TensorRT" not in row.remedies[0] and "TensorRT 10.x" in row.remedies[0]


@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None, reason="full TensorRT is installed here")
def test_a_backend_that_is_not_installed_is_a_problem_the_build_would_hit() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], ["y"])
    with pytest.raises(MissingDependencyError) as build:
        torchtrt_ext.build_engine(model, backend="tensorrt", progress=False)
    result = report(model, "tensorrt")
    (row,) = result.problems
    assert row.status == "backend missing" and not result.builds
    assert row.remedies == (build.value.remedy,) and "pip install" in row.remedies[0]  # the build's own remedy
    assert report(model, "tensorrt", checker="table").ok  # the table alone answers for a machine with TensorRT


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_rtx") is None, reason="tensorrt_rtx is not installed")
def test_inspect_exits_non_zero_when_the_build_would_fail(tmp_path, capsys) -> None:
    bad, good = tmp_path / "bad.onnx", tmp_path / "good.onnx"
    onnx.save(_model([helper.make_node("Relu", ["z"], ["y"], name="relu")], ["y"]), bad)
    onnx.save(_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], ["y"]), good)
    assert cli.main(["inspect", str(bad), "--backend", "tensorrt_rtx"]) == ExitCode.FAILED
    assert "invalid graph" in capsys.readouterr().out
    assert cli.main(["inspect", str(good), "--backend", "tensorrt_rtx"]) == ExitCode.OK
