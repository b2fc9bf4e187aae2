"""Facts about an ONNX model shared by the passes and the backend."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Union

import onnx

from torchtrt_ext.errors import InvalidInputError, failure

OnnxSource = Union[onnx.ModelProto, str, "os.PathLike[str]", bytes, bytearray]

FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                         onnx.TensorProto.DOUBLE})
"""ONNX element types of floating-point tensors."""


def default_opset(model: onnx.ModelProto) -> int | None:
    """The model's opset of the default ONNX domain; None when it imports none."""
    return next((e.version for e in model.opset_import if e.domain in ("", "ai.onnx")), None)


def read_onnx(source: OnnxSource, what: str = "the ONNX model") -> onnx.ModelProto:
    """A ModelProto from a ModelProto, a path or serialized bytes; InvalidInputError (naming the file) for a missing,
    empty, truncated or non-ONNX file, instead of protobuf's DecodeError or an empty model that reports nothing."""
    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise InvalidInputError(failure(f"ONNX file {path} does not exist", "a path to a .onnx file",
                                            "check the path, or pass the onnx.ModelProto itself"))
        name, load = str(path), lambda: onnx.load(str(path))
    elif isinstance(source, (bytes, bytearray)):
        name, load = "the ONNX bytes", lambda: onnx.load_from_string(bytes(source))
    else:
        raise InvalidInputError(failure(f"{what} is a {type(source).__name__}", "an onnx.ModelProto, a path or bytes",
                                        "export first: torchtrt_ext.export_onnx(model, example_inputs)"))
    remedy = "re-export the model (torchtrt_ext.export_onnx / torchtrt-ext export); check the path"
    try:
        model = load()
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError, onnx's errors on external data, ...
        raise InvalidInputError(failure(f"{name} is not a readable ONNX model ({type(exc).__name__}: "
                                        f"{str(exc).strip()[:200]}); truncated or not ONNX", "an ONNX model file",
                                        remedy)) from None
    if not model.graph.node and not model.graph.output:
        raise InvalidInputError(failure(f"{name} holds no ONNX graph (empty or not an ONNX file)",
                                        "an ONNX model file with a graph", remedy))
    return model
