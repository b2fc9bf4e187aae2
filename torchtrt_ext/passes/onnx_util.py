"""Facts about an ONNX model shared by the passes and the backend."""
from __future__ import annotations

import onnx

FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                         onnx.TensorProto.DOUBLE})
"""ONNX element types of floating-point tensors."""


def default_opset(model: onnx.ModelProto) -> int | None:
    """The model's opset of the default ONNX domain; None when it imports none."""
    return next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), None)
