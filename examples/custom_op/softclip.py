"""A user-defined op end to end: OpSpec -> eager -> export (both exporters) -> decomposition -> onnxruntime.

``SoftClip``: ``y = limit * tanh(x / limit)``, defined here with the public API only (``torchtrt_ext.ops``), exactly as
a user's repository would. The steps after this script — a CUDA kernel in ``csrc/kernels/softclip.cu`` behind an
``extern "C"`` launcher, ``OpSpec(cuda=...)`` for the eager CUDA path, and an ``IPluginV3`` in
``csrc/plugins/softclip/`` registered in ``plugin_lib.cpp``'s ``getCreators`` — are described in
docs/custom-op.md; until they exist the op already runs everywhere through its decomposition.

    python examples/custom_op/softclip.py
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import onnx
import torch

import torchtrt_ext
from torchtrt_ext.errors import InvalidAttributeError
from torchtrt_ext.ops import Attr, Decomposer, OpSpec, define_op, finite_positive
from torchtrt_ext.validate import validate


def _eager(x: torch.Tensor, limit: float) -> torch.Tensor:
    return limit * torch.tanh(x / limit)


def _shape_rule(shapes: list, dtypes: list, limit: float) -> list:
    return [(shapes[0], dtypes[0])]


def _decompose(d: Decomposer, inputs: list[str], outputs: list[str], limit: float) -> None:
    x = inputs[0]
    c = d.op("CastLike", d.const(limit), x)
    d.op("Mul", d.op("Tanh", d.op("Div", x, c)), c, out=outputs[0])


SOFTCLIP = define_op(OpSpec(
    name="SoftClip", inputs=("x",), outputs=("y",),
    attrs=(Attr("limit", "float", default=3.0, check=finite_positive, allowed="a finite float > 0",
                doc="half-width of the output range"),),
    eager=_eager, shape_rule=_shape_rule, decompose=_decompose, doc="y = limit * tanh(x / limit)"))


def softclip(x: torch.Tensor, limit: float = 3.0) -> torch.Tensor:
    """``limit * tanh(x / limit)``; exports as one torchtrt_ext SoftClip node."""
    return SOFTCLIP(x, limit=limit)


class Policy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return softclip(self.body(obs), limit=2.0)


def main() -> None:
    torch.manual_seed(0)
    # 1. eager + autograd + attribute checks
    x = torch.randn(3, 4, requires_grad=True)
    softclip(x, 2.0).sum().backward()
    assert torch.allclose(x.grad, 1 - torch.tanh(x / 2.0) ** 2)
    try:
        softclip(x, limit=0.0)
    except InvalidAttributeError as exc:
        print(f"attribute check: {exc}")
    # 2. export through both exporters: one SoftClip node each
    model = Policy().eval()
    example = torch.randn(2, 16)
    work = Path(tempfile.mkdtemp(prefix="softclip_"))
    for exporter in ("dynamo", "legacy"):
        exported = torchtrt_ext.export_onnx(model, (example,), work / f"policy_{exporter}.onnx", exporter=exporter)
        nodes = [n for n in exported.graph.node if n.domain == "torchtrt_ext"]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
        print(f"{exporter}: {[n.op_type for n in nodes]} {attrs}")
    # 3. decomposition -> onnxruntime, compared with PyTorch
    portable = torchtrt_ext.passes.decompose_custom_ops(exported)
    report = validate(model, portable, example)
    print(report)
    if not report.passed:
        raise SystemExit("FAIL: the decomposition does not match the eager op")
    print("skipped: CUDA kernel and C++ plugin for SoftClip (not written for this example; see docs/custom-op.md, "
          "steps 4 and 5). Build it now with plugins='decompose'.")
    print("custom_op OK")


if __name__ == "__main__":
    main()
