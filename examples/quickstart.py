"""Quickstart: a detection-style head with an L2Norm, exported to ONNX with the L2Norm plugin node.

Runs anywhere. It exports the model, runs the decomposed graph (standard ONNX ops only) with onnxruntime and compares
it with PyTorch. With TensorRT and a GPU it then compiles the model into an engine and compares the engine with PyTorch;
without a GPU but with a TensorRT backend installed (TensorRT-RTX builds engines on a CPU-only machine) it builds the
engine and says what running it needs; with neither, what it would do.
"""
from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path

import torch

import torchtrt_ext


class DetectorHead(torch.nn.Module):
    """A small backbone whose features are L2-normalized over channels, then scored (as SSD-style heads do)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
                                            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU())
        self.norm = torchtrt_ext.nn.L2Norm(dim=1)
        self.score = torch.nn.Conv2d(64, 8, 1)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.score(self.norm(self.backbone(image)))


def tensorrt_runtime_available() -> bool:
    """True when full TensorRT imports and a CUDA GPU is present."""
    if not torch.cuda.is_available() or importlib.util.find_spec("tensorrt") is None:
        return False
    try:
        import tensorrt  # noqa: F401
    except Exception:  # the bindings can install without their libraries
        return False
    return True


def installed_backend() -> str | None:
    """The TensorRT flavour that can build engines here: full TensorRT, else TensorRT-RTX, else None."""
    return next((b for b in ("tensorrt", "tensorrt_rtx") if torchtrt_ext.backend.backend_available(b)), None)


def main() -> None:
    torch.manual_seed(0)
    model = DetectorHead().eval()
    example = torch.randn(2, 3, 64, 64)

    path = Path(tempfile.mkdtemp()) / "detector_head.onnx"
    onnx_model = torchtrt_ext.export_onnx(model, (example,), path)
    exporter = {p.key: p.value for p in onnx_model.metadata_props}["torchtrt_ext.exporter"]
    custom = [n.op_type for n in onnx_model.graph.node if n.domain == "torchtrt_ext"]
    print(f"exported {path} with the {exporter} exporter (torch {torch.__version__}); custom nodes: {custom}")

    decomposed = torchtrt_ext.passes.decompose_custom_ops(onnx_model)
    import onnxruntime as ort

    session = ort.InferenceSession(decomposed.SerializeToString(), providers=["CPUExecutionProvider"])
    x = torch.randn(5, 3, 64, 64)  # another batch size than the export's: the batch is dynamic
    (got,) = session.run(None, {"image": x.numpy()})
    with torch.no_grad():
        ref = model(x)
    max_abs = (torch.from_numpy(got) - ref).abs().max().item()
    print(f"onnxruntime on the decomposed graph vs PyTorch, batch 5: max abs diff {max_abs:.2e}")
    if max_abs > 1e-4:
        raise SystemExit(f"FAIL: decomposed graph differs from PyTorch by {max_abs:.2e}")

    if tensorrt_runtime_available() and hasattr(torchtrt_ext, "compile"):
        model_trt = torchtrt_ext.compile(model.cuda(), (example.cuda(),))
        with torch.no_grad():
            diff = (model_trt(x.cuda()) - model.cuda()(x.cuda())).abs().max().item()
        print(f"TensorRT engine vs PyTorch on the GPU: max abs diff {diff:.2e}")
    elif (backend := installed_backend()) is not None:
        engine = torchtrt_ext.build_engine(onnx_model, backend=backend, progress=False)
        meta = engine.metadata
        print(f"built a {backend} engine from this ONNX: {len(engine.plan) / 1e6:.2f} MB, {meta.describe_target()}, "
              f"plugins {meta.plugin_mode} for the L2Norm node")
        print(f"running it needs a CUDA GPU this {backend} supports, with a CUDA build of torch: there, "
              f"torchtrt_ext.TRTModule(engine)(x.cuda()), or torchtrt_ext.compile(model.cuda(), (example.cuda(),), "
              f"backend={backend!r}) in one call; engine.save('head.engine') keeps it for torchtrt-ext validate/bench")
    else:
        print("no TensorRT backend installed here: with one (pip install 'torchtrt_ext[trt]', or '[rtx]' for "
              "TensorRT-RTX), torchtrt_ext.compile(model, (example,)) would build a TensorRT engine from this ONNX, "
              "with the L2Norm node running as our plugin, cache it, and return a drop-in nn.Module.")
    print("quickstart OK")


if __name__ == "__main__":
    main()
