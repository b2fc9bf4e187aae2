"""Constants beyond the low type's range (issue 33, item 1): the attention-mask spellings of transformers
(``masked_fill(mask, -1e9)``, ``float("-inf")``, ``torch.finfo(torch.float32).min``, an additive mask) and a large
scale (``x * 1e5``) go through both exporters and ``apply_precision``; the softmax onnxruntime computes matches the FP32
model's, a fully masked row included, and TensorRT-RTX builds the typed graphs."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto

import torchtrt_ext
from tests.helpers import run_onnx
from torchtrt_ext.passes.precision import apply_precision

FILLS = {"-1e9": -1e9, "-inf": float("-inf"), "finfo.min": torch.finfo(torch.float32).min}


class Attention(torch.nn.Module):
    """Scores, a mask filled (``masked_fill``) or added (``scores + mask * fill``), softmax."""

    def __init__(self, fill: float, spelling: str) -> None:
        super().__init__()
        self.fill, self.spelling = fill, spelling

    def forward(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-1, -2)
        if self.spelling == "masked_fill":
            scores = scores.masked_fill(mask, self.fill)
        else:
            scores = scores + mask.to(scores.dtype) * self.fill
        return scores.softmax(-1)


class Scale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 1e5


def _attention_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 4, 8, generator=g), torch.randn(2, 4, 8, generator=g)
    mask = torch.rand(2, 4, 4, generator=g) > 0.5
    mask[0, 1] = True  # one fully masked row: FP32 gives a uniform softmax for a finite fill, NaN for -inf
    return q, k, mask


CASES = [("masked_fill", name) for name in FILLS] + [("add", "-1e9"), ("add", "finfo.min")]


@pytest.fixture(scope="module", params=["dynamo", "legacy"])
def exported(request: pytest.FixtureRequest) -> dict[tuple[str, str], onnx.ModelProto]:
    return {(spelling, fill): torchtrt_ext.export_onnx(Attention(FILLS[fill], spelling).eval(), _attention_inputs(),
                                                      exporter=request.param)
            for spelling, fill in CASES}


@pytest.mark.parametrize(("spelling", "fill"), CASES)
def test_fp16_attention_masks_give_the_fp32_softmax(exported: dict, spelling: str, fill: str) -> None:
    pytest.importorskip("onnxruntime")
    q, k, mask = _attention_inputs()
    expected = Attention(FILLS[fill], spelling)(q, k, mask).numpy()
    typed = apply_precision(exported[(spelling, fill)], "fp16").model
    (got,) = run_onnx(typed, {"q": q, "k": k, "mask": mask})
    np.testing.assert_allclose(got, expected, atol=2e-3, equal_nan=True)


@pytest.mark.parametrize(("spelling", "fill"), CASES)
def test_bf16_keeps_the_fill_value_finite_where_fp32_had_it(exported: dict, spelling: str, fill: str) -> None:
    """onnxruntime has no bfloat16 MatMul on the CPU, so the bf16 graph is checked by its types: finfo(float32).min
    rounds to -inf in bfloat16 (and ``0 * -inf`` is NaN), so a node using it computes in FP32."""
    typed = apply_precision(exported[(spelling, fill)], "bf16").model
    onnx.checker.check_model(typed, full_check=True)
    bf16_values = [onnx.numpy_helper.to_array(i).astype(np.float32) for i in typed.graph.initializer
                   if i.data_type == TensorProto.BFLOAT16]
    bf16_values += [onnx.numpy_helper.to_array(n.attribute[0].t).astype(np.float32) for n in typed.graph.node
                    if n.op_type == "Constant" and n.attribute[0].t.data_type == TensorProto.BFLOAT16]
    if np.isfinite(FILLS[fill]):
        assert all(np.isfinite(v).all() for v in bf16_values), bf16_values


def test_fp16_keeps_a_large_scale_exact() -> None:
    """``x * 1e5`` on small values: clipping 1e5 to FP16's 65504 would be 35% off; the Mul computes in FP32."""
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(0)) * 1e-4
    typed = apply_precision(torchtrt_ext.export_onnx(Scale().eval(), (x,)), "fp16").model
    (got,) = run_onnx(typed, {"x": x})
    np.testing.assert_allclose(got, Scale()(x).numpy(), rtol=1e-6)


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_tensorrt_rtx_builds_the_typed_attention(rtx: str, isolated_cache: object, precision: str) -> None:
    model = torchtrt_ext.export_onnx(Attention(torch.finfo(torch.float32).min, "add").eval(), _attention_inputs())
    engine = torchtrt_ext.build_engine(model, backend=rtx, precision=precision, progress=False)
    assert [o.name for o in engine.metadata.outputs] == [o.name for o in model.graph.output]


class Sdpa(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_fp16_scaled_dot_product_attention_with_a_bool_mask(exporter: str) -> None:
    """SDPA exports its bool mask as a -inf fill (Where, Add, Softmax, IsNaN): the fp16 graph gives the FP32 result."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 4, 8, generator=g) for _ in range(3))
    mask = torch.rand(2, 1, 4, 4, generator=g) > 0.5
    mask[..., 0] = True
    typed = apply_precision(torchtrt_ext.export_onnx(Sdpa(), (q, k, v, mask), exporter=exporter), "fp16").model
    (got,) = run_onnx(typed, {"q": q, "k": k, "v": v, "mask": mask})
    np.testing.assert_allclose(got, Sdpa()(q, k, v, mask).numpy(), atol=2e-3)
