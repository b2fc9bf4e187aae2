"""A YOLO-style detector whose NMS exports: decode with plain tensor ops, then ``torchtrt_ext.ops.efficient_nms``.

The classic wall: a detector's NMS is a Python loop, which no static graph can hold, so every detector repository
writes an export wrapper by hand. Here the head ends in ``efficient_nms``, one ``EfficientNMS_TRT`` node with
fixed-size outputs (TensorRT's own plugin on full TensorRT, ours on TensorRT-RTX). The example

1. exports the model (one EfficientNMS_TRT node),
2. validates the decomposed export (ONNX NonMaxSuppression + TopK) against eager PyTorch on onnxruntime,
3. builds it with TensorRT-RTX, ``plugins="auto"``, when tensorrt_rtx is installed (the build runs on the CPU;
   running the engine needs an RTX-class GPU),
4. prints the detections as a user would check them.

    python examples/yolo_nms.py [--size 320]
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import tempfile
from pathlib import Path

import torch

import torchtrt_ext
from torchtrt_ext.ops import efficient_nms
from torchtrt_ext.ops.efficient_nms import EFFICIENT_NMS
from torchtrt_ext.validate import validate


class TinyYolo(torch.nn.Module):
    """Three strides (8, 16, 32) of an anchor-free head: per cell, four distances to the box sides and class logits."""

    def __init__(self, classes: int = 80, width: int = 16) -> None:
        super().__init__()
        def block(cin: int, cout: int) -> torch.nn.Module:
            return torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 3, stride=2, padding=1), torch.nn.SiLU())

        self.stem = torch.nn.Sequential(block(3, width), block(width, width), block(width, width))  # stride 8
        self.down = torch.nn.ModuleList([block(width, width), block(width, width)])  # strides 16, 32
        self.heads = torch.nn.ModuleList([torch.nn.Conv2d(width, 4 + classes, 1) for _ in range(3)])
        for head in self.heads:  # untrained, but with logits spread like a trained head's, and YOLO's 2% class prior
            torch.nn.init.normal_(head.weight, std=8.0)
            torch.nn.init.constant_(head.bias[4:], -math.log(49))

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
        features = [self.stem(image)]
        for down in self.down:
            features.append(down(features[-1]))
        boxes, logits = [], []
        for stride, feature, head in zip((8, 16, 32), features, self.heads):
            out = head(feature).flatten(2)  # [B, 4 + C, H*W]
            h, w = feature.shape[-2:]
            ys, xs = torch.meshgrid(torch.arange(h, dtype=out.dtype), torch.arange(w, dtype=out.dtype), indexing="ij")
            centers = torch.stack([xs.flatten(), ys.flatten()]).add(0.5).mul(stride)  # [2, H*W]
            sides = torch.nn.functional.softplus(out[:, :4]) * stride * 2  # left, top, right, bottom
            boxes.append(torch.cat([centers - sides[:, :2], centers + sides[:, 2:]], dim=1))
            logits.append(out[:, 4:])
        boxes_xyxy = torch.cat(boxes, dim=2).transpose(1, 2)  # [B, A, 4]
        scores = torch.cat(logits, dim=2).transpose(1, 2).sigmoid()  # [B, A, C]
        return efficient_nms(boxes_xyxy, scores, score_threshold=0.25, iou_threshold=0.45, max_output_boxes=100)


def print_detections(outputs: tuple[torch.Tensor, ...], shown: int = 3) -> None:
    """Per image: how many detections, and the best few (class, score, box) - the fixed-size outputs read back."""
    num, boxes, scores, classes = outputs
    for image in range(num.shape[0]):
        n = int(num[image, 0])
        print(f"image {image}: {n} detections")
        for i in range(min(n, shown)):
            box = ", ".join(f"{v:.1f}" for v in boxes[image, i].tolist())
            print(f"  class {int(classes[image, i]):2d}  score {float(scores[image, i]):.3f}  box [{box}]")


def build_with_rtx(exported: object, work: Path) -> None:
    """Build the exported graph with TensorRT-RTX (on the CPU), the NMS served by our plugin (plugins="auto")."""
    if importlib.util.find_spec("tensorrt_rtx") is None:
        print("skipped: TensorRT-RTX build (tensorrt_rtx is not installed: pip install 'torchtrt_ext[rtx]')")
        return
    from torchtrt_ext.backend import build_engine
    from torchtrt_ext.backend.adapter import load_backend
    from torchtrt_ext.backend.plugin_plan import Unserved
    from torchtrt_ext.backend.plugins import route

    planned = route(EFFICIENT_NMS.spec.plugin_ref, "auto", load_backend("tensorrt_rtx"))
    how = planned.reason if isinstance(planned, Unserved) else planned.how
    if isinstance(planned, Unserved) or planned.route == "decompose":  # RTX cannot build the NMS decomposition
        print(f"skipped: TensorRT-RTX build (no plugin for EfficientNMS_TRT: {how})")
        return
    engine = build_engine(exported, backend="tensorrt_rtx", plugins="auto", max_batch=4, progress=False)
    engine.save(work / "yolo.engine")
    print(f"built with TensorRT-RTX on the CPU ({how}): {engine}")
    print("skipped: running the TensorRT-RTX engine (its runtime needs an RTX-class GPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=320, help="input height and width, a multiple of 32")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = TinyYolo().eval()
    image = torch.rand(2, 3, args.size, args.size)
    work = Path(tempfile.mkdtemp(prefix="yolo_nms_"))

    exported = torchtrt_ext.export_onnx(model, (image,), work / "yolo.onnx")
    custom = [n.op_type for n in exported.graph.node if n.domain == "torchtrt_ext"]
    print(f"exported {work / 'yolo.onnx'}: custom nodes {custom}, outputs {[o.name for o in exported.graph.output]}")
    report = validate(model, torchtrt_ext.passes.decompose_custom_ops(exported), image)
    print(report)
    if not report.passed:
        raise SystemExit("FAIL: the decomposed export does not match PyTorch")
    build_with_rtx(exported, work)
    with torch.no_grad():
        print_detections(model(image))
    print("yolo_nms OK")


if __name__ == "__main__":
    main()
