"""export_onnx argument checking: errors raised before any export work, naming the argument."""
from __future__ import annotations

import pytest
import torch

import torchtrt_ext
from torchtrt_ext.errors import InvalidInputError
from tests.ops.test_l2norm import OpModel


class TwoArgs(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> dict:
        return {"sum": a + b, "prod": a * b}


@pytest.mark.parametrize("inputs,match", [
    ((torch.randn(2, 3),), r"example_inputs do not match TwoArgs.forward\('a', 'b'\): missing a required argument: 'b'"),
    ((torch.randn(2, 3), torch.randn(2, 3), torch.randn(1)), r"too many positional arguments"),
    ((torch.randn(2, 3), 3.0), r"example input 'b' is a float, not a torch.Tensor"),
])
def test_inputs_must_match_forward(inputs: tuple, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        torchtrt_ext.export_onnx(TwoArgs(), inputs)


@pytest.mark.parametrize("kwargs,match", [
    ({"exporter": "torchscript"}, r"exporter='torchscript' is not one of \('auto', 'dynamo', 'legacy'\)"),
    ({"exporter": "legacy", "opset": 22}, r"opset=22 is not supported by the legacy exporter. Allowed: 17 to 20"),
    ({"dynamic_shapes": {"y": {0: "batch"}}}, r"dynamic_shapes names input 'y', but the inputs are \['x'\]"),
    ({"dynamic_shapes": {"x": {4: "w"}}}, r"dims \[4\] outside 0..2"),
])
def test_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidInputError, match=match):
        torchtrt_ext.export_onnx(OpModel(1), (torch.randn(2, 3, 4),), **kwargs)


def test_dict_outputs_are_named_and_path_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "m.onnx"
    model = torchtrt_ext.export_onnx(TwoArgs(), (torch.randn(2, 3), torch.randn(2, 3)), path, exporter="legacy")
    assert [o.name for o in model.graph.output] == ["sum", "prod"]
    assert [i.name for i in model.graph.input] == ["a", "b"]
    assert path.read_bytes() == model.SerializeToString()


def test_static_shapes_on_request() -> None:
    model = torchtrt_ext.export_onnx(OpModel(1), (torch.randn(2, 3, 4),), dynamic_shapes={}, exporter="legacy")
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [2, 3, 4]
