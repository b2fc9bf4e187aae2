"""FP16 precision never rounds a constant guarding a division to zero (issue 20, item 1): an unfused F.normalize
of an all-zero row (common after a ReLU) must give zeros, not 0/0 = NaN. Run on onnxruntime's CPU float16 kernels."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

import torchtrt_ext
from tests.cli.models import make_relu_normalize
from torchtrt_ext.passes.precision import apply_precision


def _inputs() -> torch.Tensor:
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    x[1] = -x[1].abs()  # all negative: an all-zero row after the ReLU
    return x


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
def test_fp16_normalize_of_a_zero_row_is_zero_not_nan(exporter: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    model = torchtrt_ext.export_onnx(make_relu_normalize(), (torch.randn(3, 8),), exporter=exporter)
    typed = apply_precision(model, "fp16").model
    session = ort.InferenceSession(typed.SerializeToString(), providers=["CPUExecutionProvider"])
    x = _inputs()
    (got,) = session.run(None, {"x": x.numpy()})
    expected = make_relu_normalize()(x).numpy()
    assert np.isfinite(got).all(), got
    assert (got[1] == 0).all()
    np.testing.assert_allclose(got, expected, atol=1e-2)


def test_tiny_constants_stay_nonzero_in_fp16() -> None:
    eps = onnx.helper.make_tensor("eps", onnx.TensorProto.FLOAT, [], [1e-12])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Max", ["x", "eps"], ["m"]), onnx.helper.make_node("Div", ["x", "m"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])], [eps])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    typed = apply_precision(model, "fp16").model
    (converted,) = [i for i in typed.graph.initializer if i.name.startswith("eps")]
    value = onnx.numpy_helper.to_array(converted)
    assert value.dtype == np.float16 and value > 0
