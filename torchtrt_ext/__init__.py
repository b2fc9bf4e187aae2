"""torchtrt_ext: compile PyTorch models with ops TensorRT cannot handle into TensorRT engines.

Data path: ``export_onnx`` -> ``passes`` -> ``build_engine`` -> cache -> ``TRTModule``; ``compile`` composes them.
Importing this package needs neither TensorRT nor a GPU.
"""
from __future__ import annotations

from torchtrt_ext import errors, nn, ops, passes
from torchtrt_ext._native import plugin_library_path
from torchtrt_ext._version import __version__
from torchtrt_ext.backend import build_engine
from torchtrt_ext.bench import BenchmarkReport, benchmark
from torchtrt_ext.compile import compile
from torchtrt_ext.export import export_onnx
from torchtrt_ext.runtime import TRTModule, load
from torchtrt_ext.validate import ValidationReport, validate

__all__ = ["BenchmarkReport", "TRTModule", "ValidationReport", "__version__", "benchmark", "build_engine", "compile",
           "errors", "export_onnx", "load", "nn", "ops", "passes", "plugin_library_path", "validate"]
