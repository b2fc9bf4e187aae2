"""ONNX graph passes: decomposition of custom ops, shape inference through them, fusion and cleanup."""
from __future__ import annotations

from torchtrt_ext.passes.decompose import decompose_custom_ops
from torchtrt_ext.passes.shapes import infer_shapes

__all__ = ["decompose_custom_ops", "infer_shapes"]
