"""DeformConv2d as a TensorRT Python plugin (the fallback without the C++ library), against the tensorrt.plugin
stand-in of tests/plugins/_fake_trtp.py: registration under the C++ creator's name with the op's attributes, all
five inputs (tensorrt.plugin has no optional inputs: complete_optional_inputs gives a node the missing ones as empty
placeholders, which the plugin treats as absent), output shapes from the op definition on symbolic dims, type
combinations, and (GPU) the impl running the full-op launcher with a workspace of its own.
"""
from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import onnx
import pytest
import torch

from tests.helpers import rel_err
from tests.plugins import _fake_trtp
from torchtrt_ext.backend import python_plugins
from torchtrt_ext.ops import DOMAIN
from torchtrt_ext.passes import complete_optional_inputs
from torchtrt_ext.ops.deform_conv2d import SPEC, torch_deform_conv2d

ID = "torchtrt_ext::DeformConv2d"
ATTRS = {"stride": np.array([2, 2], np.int32), "padding": np.array([1, 1], np.int32),
         "dilation": np.array([1, 1], np.int32), "groups": 2, "offset_groups": 2}


@pytest.fixture
def fake_trtp(monkeypatch: pytest.MonkeyPatch) -> Any:
    python_plugins._dtype_maps.cache_clear()
    yield _fake_trtp.install(monkeypatch)
    python_plugins._dtype_maps.cache_clear()


def test_registered_with_every_input_and_the_op_attributes(fake_trtp: Any) -> None:
    assert ID in python_plugins.register_python_plugins()
    plugin = fake_trtp.REGISTRY[ID]
    assert plugin.tensors == list(SPEC.inputs) == ["input", "offset", "weight", "bias", "mask"]
    assert list(plugin.attrs) == [a.name for a in SPEC.attrs]
    assert list(inspect.signature(plugin.impl).parameters) == [*SPEC.inputs, *(a.name for a in SPEC.attrs), "outputs",
                                                               "stream"]


def test_output_shape_from_the_op_definition_with_absent_bias_and_mask(fake_trtp: Any) -> None:
    python_plugins.register_python_plugins()
    plugin = fake_trtp.REGISTRY[ID]
    n, h, w = fake_trtp.Sym("N"), fake_trtp.Sym("H"), fake_trtp.Sym("W")
    ho, wo = fake_trtp.Sym("HO"), fake_trtp.Sym("WO")
    for dtype in (fake_trtp.DataType.FLOAT, fake_trtp.DataType.HALF, fake_trtp.DataType.BF16):
        desc = fake_trtp.TensorDesc
        inputs = [desc((n, 16, h, w), dtype), desc((n, 36, ho, wo), dtype), desc((24, 8, 3, 3), dtype)]
        empty = [desc((0,), dtype), desc((0,), dtype)]
        out = plugin.descs(inputs + empty, ATTRS)
        assert out.dtype == dtype and out.shape_expr[:2] == (n, 24)
        assert repr(out.shape_expr[2]) == "(((((H + 2) - 2) - 1) // 2) + 1)"
        assert repr(out.shape_expr[3]) == "(((((W + 2) - 2) - 1) // 2) + 1)"
        with_all = plugin.descs(inputs + [desc((24,), dtype), desc((n, 18, ho, wo), dtype)], ATTRS)
        assert with_all.shape_expr[:2] == (n, 24)
    static = [fake_trtp.TensorDesc(s) for s in [(2, 16, 9, 11), (2, 36, 5, 6), (24, 8, 3, 3), (0,), (0,)]]
    assert plugin.descs(static, ATTRS).shape_expr == (2, 24, 5, 6)


def test_autotune_offers_one_linear_type_for_all_five_inputs(fake_trtp: Any) -> None:
    python_plugins.register_python_plugins()
    plugin = fake_trtp.REGISTRY[ID]
    shapes = [(2, 16, 9, 11), (2, 36, 5, 6), (24, 8, 3, 3), (24,), (0,)]  # mask absent (a placeholder)
    combos = plugin.combinations([fake_trtp.TensorDesc(s) for s in shapes], ATTRS,
                                 (fake_trtp.TensorDesc((2, 24, 5, 6)),))
    assert [(c.io_types, c.layouts) for c in combos] == [
        (["FP32"] * 6, ["LINEAR"]), (["FP16"] * 6, ["LINEAR"]), (["BF16"] * 6, ["LINEAR"])]


def test_complete_optional_inputs_pads_nodes_with_empty_placeholders() -> None:
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("DeformConv2d", ["x", "offset", "weight"], ["y"], name="dcn", domain=DOMAIN,
                               stride=[1, 1], padding=[1, 1], dilation=[1, 1], groups=1, offset_groups=1),
         onnx.helper.make_node("Relu", ["y"], ["z"])],
        "g", [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT16, None) for n in ("x", "offset", "weight")],
        [onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT16, None)])
    model = onnx.helper.make_model(graph)
    done = complete_optional_inputs(model)
    dcn = next(n for n in done.graph.node if n.op_type == "DeformConv2d")
    assert len(dcn.input) == 5 and dcn.input[3] == dcn.input[4]
    cast = next(n for n in done.graph.node if n.output[0] == dcn.input[3])
    assert cast.op_type == "CastLike" and cast.input[1] == "x"  # the node's dtype
    const = next(n for n in done.graph.node if n.output[0] == cast.input[0])
    assert onnx.numpy_helper.to_array(const.attribute[0].t).shape == (0,)
    order = [n.name for n in done.graph.node]
    assert order.index(cast.name) < order.index("dcn")  # placeholders come before their user
    assert len(model.graph.node[0].input) == 3  # the input model is untouched
    assert complete_optional_inputs(done).graph.node == done.graph.node  # complete nodes unchanged


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("with_bias,with_mask", [(False, False), (True, False), (True, True)])
def test_impl_runs_the_full_op_launcher_on_the_given_stream(fake_trtp: Any, dtype: torch.dtype, with_bias: bool,
                                                            with_mask: bool) -> None:
    """The impl on device buffers as TensorRT hands them (absent inputs as empty tensors) against the PyTorch op."""
    python_plugins.register_python_plugins()
    plugin = fake_trtp.REGISTRY[ID]
    trt_type = {torch.float32: fake_trtp.DataType.FLOAT, torch.float16: fake_trtp.DataType.HALF,
                torch.bfloat16: fake_trtp.DataType.BF16}[dtype]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 16, 9, 11, generator=gen)
    offset = torch.randn(2, 36, 5, 6, generator=gen) * 4  # reaching outside the image
    weight = torch.randn(24, 8, 3, 3, generator=gen) * 0.1
    bias = torch.randn(24, generator=gen) if with_bias else None
    mask = torch.rand(2, 18, 5, 6, generator=gen) if with_mask else None
    tensors = [t.to("cuda", dtype) if t is not None else torch.empty(0, device="cuda", dtype=dtype)
               for t in (x, offset, weight, bias, mask)]
    y = torch.full((2, 24, 5, 6), float("nan"), device="cuda", dtype=dtype)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        plugin.run([fake_trtp.Tensor(t.data_ptr(), t.shape, trt_type) for t in tensors], ATTRS,
                   (fake_trtp.Tensor(y.data_ptr(), y.shape, trt_type),), stream=stream.cuda_stream)
    stream.synchronize()
    rounded = [None if t is None else t.to(dtype).double() for t in (x, offset, weight, bias, mask)]
    expected = torch_deform_conv2d(*rounded, (2, 2), (1, 1), (1, 1), 2, 2).double()
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
    err = rel_err(y.cpu(), expected)
    assert err < tol, f"{dtype} bias={with_bias} mask={with_mask}: relative error {err:.3g}"
