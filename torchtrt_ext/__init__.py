"""torchtrt_ext: compile PyTorch models with ops TensorRT cannot handle into TensorRT engines.

Data path: ``export_onnx`` -> ``passes`` -> ``build_engine`` -> cache -> ``TRTModule``; ``compile`` composes them.
Importing this package needs neither TensorRT nor a GPU.
"""
from __future__ import annotations

from torchtrt_ext import errors, nn, ops, passes
from torchtrt_ext.export import export_onnx

__all__ = ["errors", "export_onnx", "nn", "ops", "passes"]
__version__ = "0.1.0"
