"""The doctor checks each torchtrt_ext op's ONNX function against the op's own body: missing, altered, or (on
TensorRT-RTX) a body RTX cannot build; nodes whose op has a function in the file are still reported as custom nodes."""
from __future__ import annotations

import onnx
import torch

from tests.ops.test_function import TWO_CALLS, two_node_model
from torchtrt_ext.doctor import report


def _functions(model: onnx.ModelProto, backend: str = "tensorrt") -> list[tuple[str, str, bool]]:
    findings = report(model, backend=backend, checker="table").findings
    return [(f.op_type, f.status, f.problem) for f in findings if f.node.endswith("function>")]


def test_the_exported_functions_pass_and_the_nodes_are_still_custom_nodes() -> None:
    model = two_node_model("L2Norm", TWO_CALLS["L2Norm"], torch.float32)
    result = report(model, backend="tensorrt", checker="table")
    assert [f.node for f in result.findings if f.domain == "torchtrt_ext" and f.status.startswith("plugin")] == [
        "L2Norm_0", "L2Norm_1"]
    assert _functions(model) == []


def test_a_missing_function_is_reported_without_blocking_the_build() -> None:
    model = two_node_model("DeformConv2d", TWO_CALLS["DeformConv2d"], torch.float32)
    other = two_node_model("L2Norm", TWO_CALLS["L2Norm"], torch.float32)
    model.functions[0].CopyFrom(other.functions[0])  # the file carries L2Norm's function, not DeformConv2d's
    assert _functions(model) == [("DeformConv2d", "function missing", False)]
    del model.functions[:]  # no function at all: the --no-functions form, nothing to say
    assert _functions(model) == []


def test_an_altered_body_is_a_problem() -> None:
    model = two_node_model("L2Norm", TWO_CALLS["L2Norm"], torch.float32)
    (div,) = [n for n in model.functions[0].node if n.op_type == "Div"]
    div.op_type = "Mul"
    assert _functions(model) == [("L2Norm", "function altered", True)]
    assert not report(model, backend="tensorrt", checker="table").ok


def test_on_tensorrt_rtx_the_nms_body_is_named_as_not_buildable() -> None:
    model = two_node_model("EfficientNMS_TRT", TWO_CALLS["EfficientNMS_TRT"], torch.float32)
    assert _functions(model, "tensorrt") == []
    assert _functions(model, "tensorrt_rtx") == [("EfficientNMS_TRT", "function not buildable", False)]
