"""Default tolerances scale with magnitude (issue 33, item 9): an rtol per precision, so FP16 boxes in pixels pass
where they are as close as FP16 allows, and a bfloat16 comparison is reported and judged as bf16."""
from __future__ import annotations

import torch

import torchtrt_ext
from torchtrt_ext.validate import TOLERANCES, validate
from tests.test_validate import Head


def _boxes(x: torch.Tensor) -> torch.Tensor:
    return x.abs() * 64 + 32  # YOLO-like decoded boxes: tens of pixels


def test_fp16_boxes_in_pixels_pass_at_the_default_tolerance() -> None:
    """Boxes ~64 px off by 0.018 are as good as FP16 gets there (one FP16 ulp at 64 is 0.0625)."""
    x = torch.randn(2, 100, 4)
    report = validate(_boxes, lambda t: _boxes(t) + 0.018, (x,), precision="fp16")
    assert report.passed, report.to_table()
    assert report.rtol == TOLERANCES["fp16"][1] > 0


def test_fp16_default_still_fails_the_same_error_near_one() -> None:
    x = torch.randn(2, 100, 4)
    report = validate(lambda t: torch.sigmoid(t), lambda t: torch.sigmoid(t) + 0.018, (x,), precision="fp16")
    assert not report.passed and "max abs diff 0.018 > atol 0.01 + rtol" in report.outputs[0].reason


def test_bfloat16_inputs_are_judged_as_bf16_against_onnxruntime(tmp_path) -> None:
    model = Head().eval()
    x = torch.randn(2, 3, 16, 16)
    path = torchtrt_ext.export_onnx(model, (x,), tmp_path / "head.onnx")
    report = validate(model.to(torch.bfloat16), path, (x.to(torch.bfloat16),))
    assert report.precision == "bf16" and (report.atol, report.rtol) == TOLERANCES["bf16"], report.to_table()
    assert "(bf16: atol=" in report.to_table().splitlines()[0]
    assert report.passed, report.to_table()
