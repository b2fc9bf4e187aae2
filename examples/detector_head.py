"""A detection model with an L2Norm head: compile, validate, bench — in whatever mode this machine allows.

- GPU + full TensorRT: ``compile`` (export -> fuse -> cached build -> TRTModule), ``validate`` against PyTorch,
  ``benchmark`` eager vs torch.compile vs the engine (CUDA events, P50/P95).
- Otherwise: export, fusion report, ``validate`` of the decomposed export on onnxruntime, an engine built with
  TensorRT-RTX on the CPU if it is installed, and a CPU benchmark of eager vs onnxruntime. Every skipped step is printed
  as ``skipped: <step> (<reason>)``.

    python examples/detector_head.py [--iters N]
"""
from __future__ import annotations

import argparse
import importlib.util
import tempfile
from pathlib import Path

import torch

import torchtrt_ext
from torchtrt_ext.bench import benchmark
from torchtrt_ext.validate import validate


class Detector(torch.nn.Module):
    """Backbone -> L2-normalized features (the SSD-style head's Normalize) -> box and class heads, as a dict."""

    def __init__(self, classes: int = 5, anchors: int = 3) -> None:
        super().__init__()
        self.backbone = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU())
        self.norm = torchtrt_ext.nn.L2Norm(dim=1)
        self.scale = torch.nn.Parameter(torch.full((1, 64, 1, 1), 20.0))  # SSD's learned rescale after Normalize
        self.boxes = torch.nn.Conv2d(64, anchors * 4, 3, padding=1)
        self.scores = torch.nn.Conv2d(64, anchors * classes, 3, padding=1)

    def forward(self, image: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.norm(self.backbone(image)) * self.scale
        return {"boxes": self.boxes(features), "scores": self.scores(features).sigmoid()}


def gpu_tensorrt_reason() -> str | None:
    """None when a GPU and full TensorRT are usable here, else why not."""
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    if importlib.util.find_spec("tensorrt") is None:
        return "full TensorRT is not installed"
    try:
        import tensorrt  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - the bindings can install without their libraries
        return f"tensorrt does not import: {exc}"
    return None


def run_gpu(model: Detector, example: torch.Tensor, iters: int) -> None:
    from torchtrt_ext.compile import compile

    model = model.cuda()
    example = example.cuda()
    model_trt = compile(model, (example,), precision="fp16", validate=False)
    report = validate(model, model_trt, example, precision="fp16")
    print(report)
    candidates = {"eager": model, "torch.compile": torch.compile(model), "torchtrt_ext engine": model_trt}
    print(benchmark(candidates, example, warmup=50, iters=max(iters, 100)))


def run_cpu(model: Detector, example: torch.Tensor, iters: int, reason: str) -> None:
    print(f"skipped: compile, validate and bench of the TensorRT engine ({reason})")
    work = Path(tempfile.mkdtemp(prefix="detector_head_"))
    exported = torchtrt_ext.export_onnx(model, (example,), work / "detector.onnx")
    from torchtrt_ext.passes.fuse_l2norm import fuse_l2norm_with_report

    fused, fusion = fuse_l2norm_with_report(exported)
    custom = [n.op_type for n in fused.graph.node if n.domain == "torchtrt_ext"]
    print(f"exported {work / 'detector.onnx'}: outputs {[o.name for o in exported.graph.output]}, custom nodes "
          f"{custom}, {len(fusion.fused)} pattern(s) fused")
    portable = torchtrt_ext.passes.decompose_custom_ops(fused)
    report = validate(model, portable, example)
    print(report)
    if not report.passed:
        raise SystemExit("FAIL: the decomposed export does not match PyTorch")
    if importlib.util.find_spec("tensorrt_rtx") is not None:
        from torchtrt_ext.backend import build_engine

        engine = build_engine(fused, backend="tensorrt_rtx", plugins="decompose", max_batch=8, progress=False)
        engine.save(work / "detector.engine")
        print(f"built with TensorRT-RTX on the CPU: {engine}")
        print("skipped: running the TensorRT-RTX engine (its runtime needs an RTX-class GPU)")
    else:
        print("skipped: TensorRT-RTX build (tensorrt_rtx is not installed: pip install 'torchtrt_ext[rtx]')")
    print(benchmark({"eager (CPU)": model, "onnxruntime (decomposed)": portable}, example, warmup=5, iters=iters))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=20, help="timed runs per candidate (default 20)")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Detector().eval()
    example = torch.randn(2, 3, 64, 64)
    reason = gpu_tensorrt_reason()
    if reason is None:
        run_gpu(model, example, args.iters)
    else:
        run_cpu(model, example, args.iters, reason)
    print("detector_head OK")


if __name__ == "__main__":
    main()
