"""ONNX -> TensorRT engine: builder, profiles, precision, plugin modes, and the Engine object.

``tensorrt`` and ``tensorrt_rtx`` are imported lazily (``adapter.load_backend``), so importing this package needs
neither.
"""
from __future__ import annotations

from torchtrt_ext.backend.adapter import BACKENDS, TRTApi, backend_available, load_backend
from torchtrt_ext.backend.builder import build_engine
from torchtrt_ext.backend.engine import Engine, EngineMetadata, TensorInfo
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.backend.plugins import PLUGIN_MODES, resolve_plugin_plan, route
from torchtrt_ext.passes.precision import PRECISIONS, apply_precision
from torchtrt_ext.backend.profiles import Profile, ShapeRange, profiles_from_example_shapes

__all__ = ["BACKENDS", "PLUGIN_MODES", "PRECISIONS", "BuildOptions", "Engine", "EngineMetadata", "Profile", "ShapeRange",
           "TRTApi", "Target", "TensorInfo", "apply_precision", "backend_available", "build_engine", "load_backend",
           "profiles_from_example_shapes", "resolve_plugin_plan", "route"]
