"""export_onnx argument checking: errors raised before any export work, naming the argument."""
from __future__ import annotations

import re

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


class BothOps(torch.nn.Module):
    """A deformable conv, then two L2 normalizations along different axes (one op type, two nodes)."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = torch.nn.Conv2d(4, 18, 3, padding=1)
        self.dcn = torchtrt_ext.nn.DeformConv2d(4, 6, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torchtrt_ext.ops.l2norm(self.dcn(x, self.offset(x)), dim=1)
        return torchtrt_ext.ops.l2norm(y, dim=-1, eps=0.1)


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_the_file_carries_one_function_per_op_type_and_runs_on_onnxruntime_as_it_is(exporter: str) -> None:
    import onnx

    from tests.helpers import rel_err, run_onnx

    torch.manual_seed(0)
    model, x = BothOps().eval(), torch.randn(2, 4, 8, 8)
    exported = torchtrt_ext.export_onnx(model, (x,), exporter=exporter)
    assert sorted((f.domain, f.name) for f in exported.functions) == [("torchtrt_ext", "DeformConv2d"),
                                                                      ("torchtrt_ext", "L2Norm")]
    custom = [n for n in exported.graph.node if n.domain == "torchtrt_ext"]
    assert [n.op_type for n in custom] == ["DeformConv2d", "L2Norm", "L2Norm"]
    assert all({"plugin_version", "plugin_namespace"} <= {a.name for a in n.attribute} for n in custom)
    onnx.checker.check_model(exported, full_check=True)
    (got,) = run_onnx(exported, {"x": x})  # no pass: onnxruntime runs the functions' bodies
    with torch.no_grad():
        assert rel_err(got, model(x)) < 1e-5
    plain = torchtrt_ext.export_onnx(model, (x,), exporter=exporter, functions=False)
    assert not plain.functions and [n.op_type for n in plain.graph.node if n.domain] == [n.op_type for n in custom]


# torch's own words when the legacy exporter meets a model over protobuf's limit (torch.onnx.utils, 2.x)
_TORCH_2GIB = ("The serialized model is larger than the 2GiB limit imposed by the protobuf library. Therefore the "
               "output file must be a file path, so that the ONNX external data can be written to the same directory.")


def _failing(message: str):  # type: ignore[no-untyped-def]
    def run(*args: object) -> None:
        raise RuntimeError(message)
    return run


@pytest.mark.parametrize(("exporter", "failures", "remedy", "not_in_remedy"), [
    ("auto", {"dynamo": "cannot trace", "legacy": "cannot trace"}, r"try static shapes", "exporter="),
    ("dynamo", {"dynamo": "cannot trace"}, r"try exporter='legacy', or static shapes", "exporter='dynamo'"),
    ("legacy", {"legacy": "cannot trace"}, r"try exporter='dynamo', or static shapes", "exporter='legacy'"),
    ("auto", {"dynamo": "cannot trace", "legacy": _TORCH_2GIB}, r"cannot pass 2 GiB: export with exporter='dynamo' "
     r"\(it writes the weights as external data\)", "exporter='legacy'"),
])
def test_the_remedy_of_a_failed_export_names_what_was_not_tried(monkeypatch: pytest.MonkeyPatch, exporter: str,
                                                                 failures: dict[str, str], remedy: str,
                                                                 not_in_remedy: str) -> None:
    """Issue 33 item 2: the legacy exporter failing on a model over 2 GiB was told to try the legacy exporter. The
    exporters are stand-ins raising torch's messages (a real > 2 GiB export needs ~8 GB of memory)."""
    from torchtrt_ext import export
    from torchtrt_ext.errors import ExportError

    for which, message in failures.items():
        monkeypatch.setattr(export, f"_export_{which}", _failing(message))
    with pytest.raises(ExportError) as info:
        torchtrt_ext.export_onnx(torch.nn.Linear(4, 2), (torch.randn(1, 4),), exporter=exporter)
    assert re.search(remedy, info.value.remedy) and not_in_remedy not in info.value.remedy
