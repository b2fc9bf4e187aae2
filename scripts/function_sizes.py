"""Bytes of the exported ONNX files of the examples with and without the custom ops' ONNX functions (docs/deployment.md
quotes the table). Run from the repository root: ``python scripts/function_sizes.py``."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

import torchtrt_ext

ROOT = Path(__file__).resolve().parents[1]


def _example(name: str, attribute: str) -> type[torch.nn.Module]:
    spec = importlib.util.spec_from_file_location(f"example_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model: type[torch.nn.Module] = getattr(module, attribute)
    return model


class DeformableBlock(torch.nn.Module):
    """``count`` offset-predicting convs each feeding a DeformConv2d (one op type, ``count`` nodes)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.offsets = torch.nn.ModuleList(torch.nn.Conv2d(8, 18, 3, padding=1) for _ in range(count))
        self.dcns = torch.nn.ModuleList(torchtrt_ext.nn.DeformConv2d(8, 8, 3, padding=1) for _ in range(count))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for offset, dcn in zip(self.offsets, self.dcns):
            x = dcn(x, offset(x))
        return x


def main() -> None:
    torch.manual_seed(0)
    cases = [("examples/quickstart.py DetectorHead", _example("quickstart", "DetectorHead")(), (2, 3, 64, 64)),
             ("examples/detector_head.py Detector", _example("detector_head", "Detector")(), (2, 3, 64, 64)),
             ("examples/yolo_nms.py TinyYolo", _example("yolo_nms", "TinyYolo")(), (2, 3, 320, 320)),
             ("1 DeformConv2d", DeformableBlock(1), (1, 8, 16, 16)),
             ("100 DeformConv2d", DeformableBlock(100), (1, 8, 16, 16))]
    print("| model | custom nodes | bytes without functions | bytes with functions | growth |")
    print("|---|---|---:|---:|---:|")
    for name, model, shape in cases:
        example = (torch.randn(*shape),)
        exported = [torchtrt_ext.export_onnx(model.eval(), example, functions=f, exporter="legacy")
                    for f in (False, True)]
        sizes = [len(m.SerializeToString()) for m in exported]
        nodes = len([n for n in exported[1].graph.node if n.domain == "torchtrt_ext"])
        print(f"| {name} | {nodes} | {sizes[0]:,} | {sizes[1]:,} | +{sizes[1] - sizes[0]:,} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
