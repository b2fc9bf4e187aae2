"""Export keeps a user's ``autograd.Function.symbolic`` nodes (torchtrt_ext.export): the default exporter takes the
legacy one for such a model and says so; "dynamo" refuses it naming the Function; a symbolic emitting a small
subgraph with attributes of every kind survives."""
from __future__ import annotations

import logging
import threading

import numpy as np
import onnx
import pytest
import torch

import torchtrt_ext
from tests.byo_op.conftest import ConvScale2, Scale2
from tests.helpers import op_types
from torchtrt_ext.errors import ExportError

X = torch.randn(2, 3, 8, 8)


def test_the_default_export_keeps_the_users_node(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        model = torchtrt_ext.export_onnx(ConvScale2().eval(), (X,))
    assert op_types(model) == [("", "Conv"), ("mycorp", "Scale2"), ("", "Relu")]
    node = model.graph.node[1]
    assert [(a.name, a.type, a.f) for a in node.attribute] == [("factor", onnx.AttributeProto.FLOAT, 3.0)]
    assert {(o.domain, o.version) for o in model.opset_import} >= {("mycorp", 1)}
    assert {p.key: p.value for p in model.metadata_props}["torchtrt_ext.exporter"] == "legacy"
    said = [r.getMessage() for r in caplog.records if "legacy TorchScript exporter" in r.getMessage()]
    assert len(said) == 1 and "tests.byo_op.conftest.Scale2 define(s) symbolic" in said[0], caplog.text


def test_dynamo_refuses_to_drop_the_node_and_names_the_function() -> None:
    with pytest.raises(ExportError, match=r"exporter='dynamo' cannot keep the custom nodes of "
                                          r"tests\.byo_op\.conftest\.Scale2.*exporter='auto' or 'legacy'"):
        torchtrt_ext.export_onnx(ConvScale2().eval(), (X,), exporter="dynamo")


def test_a_model_without_symbolic_functions_still_takes_dynamo() -> None:
    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            return x * 2

    class Uses(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return Plain.apply(x) + 1

    model = torchtrt_ext.export_onnx(Uses().eval(), (X,))
    assert {p.key: p.value for p in model.metadata_props}["torchtrt_ext.exporter"] == "dynamo"
    assert torch.autograd.Function.__dict__["apply"].__func__.__module__ == "torch.autograd.function"  # put back


BIAS = torch.tensor([0.5, -1.5], dtype=torch.float32)


class Pipeline(torch.autograd.Function):
    """A symbolic emitting three nodes (two custom, one standard) with attributes of every kind."""

    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x + 1

    @staticmethod
    def symbolic(g: torch.Graph, x: torch.Value) -> torch.Value:
        y = g.op("mycorp::Pre", x, alpha_f=0.25, count_i=7, mode_s="nearest", scales_f=[1.0, 2.5], dims_i=[0, 2, 3])
        z = g.op("mycorp::Post", y, bias_t=BIAS, names_s=["a", "b"])
        return g.op("Add", z, g.op("Constant", value_t=torch.tensor(1.0)))


def test_a_symbolic_subgraph_with_every_attribute_kind_survives() -> None:
    class Uses(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return Pipeline.apply(x).relu()

    model = torchtrt_ext.export_onnx(Uses().eval(), (torch.randn(2, 4),))
    nodes = {n.op_type: n for n in model.graph.node}
    assert [(n.domain, n.op_type) for n in model.graph.node if n.domain] == [("mycorp", "Pre"), ("mycorp", "Post")]
    pre = {a.name: onnx.helper.get_attribute_value(a) for a in nodes["Pre"].attribute}
    assert pre == {"alpha": pytest.approx(0.25), "count": 7, "mode": b"nearest", "scales": [1.0, 2.5],
                   "dims": [0, 2, 3]}
    post = {a.name: a for a in nodes["Post"].attribute}
    assert post["bias"].type == onnx.AttributeProto.TENSOR
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(post["bias"].t), BIAS.numpy())
    assert list(post["names"].strings) == [b"a", b"b"]
    assert nodes["Post"].input[0] == nodes["Pre"].output[0]
    assert {"Add", "Relu"} <= set(nodes)


def test_an_opset_the_legacy_exporter_lacks_fails_naming_the_function() -> None:
    with pytest.raises(ExportError, match=r"opset 21 cannot keep the custom nodes of tests\.byo_op\.conftest\.Scale2"
                                          r".*pass opset=20 or lower"):
        torchtrt_ext.export_onnx(ConvScale2().eval(), (X,), opset=21)


def test_recording_in_two_threads_puts_the_original_apply_back() -> None:
    """Two threads record at once (overlapping, in either order of exit): each sees the Functions it ran, and the
    original ``Function.apply`` is back after both. (Two legacy exports at once are not possible: torch's exporter
    keeps one global "in export" flag.)"""
    from torchtrt_ext.export import _functions_with_symbolic

    both_inside = threading.Barrier(2)
    seen: dict[str, list[type]] = {}

    def record(name: str, run: bool) -> None:
        with _functions_with_symbolic() as functions:
            both_inside.wait()
            if run:
                Scale2.apply(X)
            seen[name] = list(functions)
            both_inside.wait()

    threads = [threading.Thread(target=record, args=(name, name == "runs")) for name in ("runs", "idle")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == {"runs": [Scale2], "idle": []}
    assert torch.autograd.Function.__dict__["apply"].__func__.__module__ == "torch.autograd.function"
