"""apply_precision takes what the other passes take (issue 33, item 14): a ModelProto, a path or serialized bytes."""
from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from torchtrt_ext.errors import InvalidInputError
from torchtrt_ext.passes import apply_precision, decompose_custom_ops


def _model() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_path_and_bytes_give_what_the_model_gives(tmp_path: Path) -> None:
    model = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    decompose_custom_ops(path)  # the other passes take paths
    expected = apply_precision(model, "fp16").model.SerializeToString()
    for source in (path, str(path), model.SerializeToString()):
        assert apply_precision(source, "fp16").model.SerializeToString() == expected
    with pytest.raises(InvalidInputError, match="does not exist"):
        apply_precision(tmp_path / "missing.onnx", "fp16")
