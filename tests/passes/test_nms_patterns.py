"""The doctor names ops.efficient_nms for an NMS loop (ONNX Loop/If) and for a bare NonMaxSuppression whose indices
feed gathers of data-dependent size; a fixed-size NMS (ours, or its decomposition) is not reported."""
from __future__ import annotations

import io
import warnings

import onnx
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper

import torchtrt_ext
from torchtrt_ext.ops import efficient_nms
from torchtrt_ext.doctor.nms_patterns import find_nms_patterns
from torchtrt_ext.doctor import report


def python_nms(boxes: torch.Tensor, scores: torch.Tensor, threshold: float) -> torch.Tensor:
    """The NMS every detector repository once had: a Python loop over boxes."""
    order = scores.argsort(descending=True)
    keep = torch.zeros_like(scores, dtype=torch.bool)
    suppressed = torch.zeros_like(keep)
    for i in range(order.shape[0]):
        index = order[i]
        if bool(suppressed[index]):
            continue
        keep[index] = True
        x1 = torch.max(boxes[index, 0], boxes[:, 0])
        y1 = torch.max(boxes[index, 1], boxes[:, 1])
        x2 = torch.min(boxes[index, 2], boxes[:, 2])
        y2 = torch.min(boxes[index, 3], boxes[:, 3])
        inter = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
        area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
        iou = inter / (area[index] + area - inter)
        suppressed = suppressed | (iou > threshold)
    return keep


class LoopNms(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script: what such repositories used
            self.nms = torch.jit.script(python_nms)

    def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return self.nms(boxes, scores, 0.5)


def _legacy_export(module: torch.nn.Module, inputs: tuple) -> onnx.ModelProto:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version=17, input_names=["boxes", "scores"])
    return onnx.load_from_string(buffer.getvalue())


def _bare_nms_graph() -> onnx.ModelProto:
    """NonMaxSuppression -> Gather(column 2) -> Gather(boxes by those indices): detections of data-dependent size."""
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "k", "iou", "score"], ["selected"], name="nms"),
             helper.make_node("Gather", ["selected", "col"], ["box_index"], name="column", axis=1),
             helper.make_node("Gather", ["flat_boxes", "box_index"], ["picked"], name="pick_boxes", axis=0),
             helper.make_node("Squeeze", ["boxes", "zero"], ["flat_boxes"], name="squeeze")]
    inits = [helper.make_tensor("k", T.INT64, [1], [10]), helper.make_tensor("iou", T.FLOAT, [1], [0.5]),
             helper.make_tensor("score", T.FLOAT, [1], [0.2]), helper.make_tensor("col", T.INT64, [], [2]),
             helper.make_tensor("zero", T.INT64, [1], [0])]
    graph = helper.make_graph([nodes[3]] + nodes[:3], "g",
                              [helper.make_tensor_value_info("boxes", T.FLOAT, [1, 20, 4]),
                               helper.make_tensor_value_info("scores", T.FLOAT, [1, 1, 20])],
                              [helper.make_tensor_value_info("picked", T.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_python_nms_loop_is_recognised() -> None:
    model = _legacy_export(LoopNms(), (torch.rand(20, 4), torch.rand(20)))
    patterns = find_nms_patterns(model)
    assert [p.kind for p in patterns][:1] == ["loop"] and patterns[0].op_type == "Loop", patterns
    assert "box overlaps" in patterns[0].detail


def test_bare_nonmaxsuppression_with_dynamic_gathers_is_recognised() -> None:
    patterns = find_nms_patterns(_bare_nms_graph())
    assert [(p.node, p.kind) for p in patterns] == [("nms", "dynamic")]
    assert "pick_boxes" in patterns[0].detail


class FixedNms(torch.nn.Module):
    def forward(self, boxes: torch.Tensor, scores: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return efficient_nms(boxes, scores, max_output_boxes=5)


def test_fixed_size_nms_and_its_decomposition_are_not_reported() -> None:
    model = torchtrt_ext.export_onnx(FixedNms().eval(), (torch.rand(1, 20, 4), torch.rand(1, 20, 3)))
    assert find_nms_patterns(model) == []
    assert find_nms_patterns(torchtrt_ext.passes.decompose_custom_ops(model)) == []


@pytest.mark.parametrize("backend,problem", [("tensorrt", False), ("tensorrt_rtx", True)])
def test_report_names_efficient_nms_as_the_remedy(backend: str, problem: bool) -> None:
    result = report(_bare_nms_graph(), backend, checker="table")
    found = [f for f in result.findings if f.status == "nms pattern"]
    assert len(found) == 1 and found[0].node == "nms" and found[0].problem is problem
    assert "torchtrt_ext.ops.efficient_nms" in found[0].detail
    assert any("efficient_nms" in r and "EfficientNMS_TRT" in r for r in found[0].remedies)
    assert ("efficient_nms" in result.to_table()) and result.ok is not problem
