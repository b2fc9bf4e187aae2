"""An op defined here, not in the library (two inputs, two outputs), gets every layer from its OpSpec alone."""
from __future__ import annotations

import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext.errors import InvalidAttributeError
from torchtrt_ext.ops import Attr, Decomposer, OpSpec, define_op
from tests.helpers import rel_err, run_onnx


def _eager(a: torch.Tensor, b: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    return a + alpha * b, a * b


def _shape_rule(shapes: list, dtypes: list, alpha: float) -> list:
    return [(shapes[0], dtypes[0]), (shapes[0], dtypes[0])]


def _decompose(d: Decomposer, inputs: list[str], outputs: list[str], alpha: float) -> None:
    a, b = inputs
    d.op("Add", a, d.op("Mul", b, d.op("CastLike", d.const(alpha), b)), out=outputs[0])
    d.op("Mul", a, b, out=outputs[1])


AXPY_PROD = define_op(OpSpec(
    name="TestAxpyProd", inputs=("a", "b"), outputs=("axpy", "prod"),
    attrs=(Attr("alpha", "float", default=1.0, check=lambda v: v != 0, allowed="a non-zero float"),),
    eager=_eager, shape_rule=_shape_rule, decompose=_decompose, doc="(a + alpha*b, a*b)"))


class UsesIt(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s, p = AXPY_PROD(a.relu(), b, alpha=0.5)
        return s * 2, p


def test_eager_and_autograd() -> None:
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    s, p = AXPY_PROD(a, b, alpha=0.5)
    assert torch.equal(s, a + 0.5 * b) and torch.equal(p, a * b)
    (s.sum() + p.sum()).backward()
    assert torch.allclose(a.grad, 1 + b) and torch.allclose(b.grad, 0.5 + a)


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_both_exports_and_decomposition(exporter: str) -> None:
    a, b = torch.randn(2, 5), torch.randn(2, 5)
    model = torchtrt_ext.export_onnx(UsesIt().eval(), (a, b), exporter=exporter)
    custom = [n for n in model.graph.node if n.domain == "torchtrt_ext"]
    assert [n.op_type for n in custom] == ["TestAxpyProd"] and len(custom[0].output) == 2
    attrs = {x.name: onnx.helper.get_attribute_value(x) for x in custom[0].attribute}
    assert attrs == {"alpha": 0.5, "plugin_version": b"1", "plugin_namespace": b"torchtrt_ext"}
    infos = {v.name for v in model.graph.value_info}
    assert set(custom[0].output) <= infos | {o.name for o in model.graph.output}  # shapes pass through
    decomposed = torchtrt_ext.passes.decompose_custom_ops(model)
    a, b = torch.randn(6, 5), torch.randn(6, 5)
    got = run_onnx(decomposed, {"a": a, "b": b})
    for g, r in zip(got, UsesIt()(a, b)):
        assert rel_err(g, r) < 1e-6


def test_attribute_rule_applies_to_user_ops() -> None:
    with pytest.raises(InvalidAttributeError, match="alpha=0.0 is not allowed. Allowed: a non-zero float"):
        AXPY_PROD(torch.randn(2), torch.randn(2), alpha=0.0)


def test_defining_twice_is_refused() -> None:
    with pytest.raises(torchtrt_ext.errors.OpDefinitionError, match="already defined"):
        define_op(AXPY_PROD.spec)
