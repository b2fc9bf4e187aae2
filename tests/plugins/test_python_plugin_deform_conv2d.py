"""DeformConv2d as a TensorRT Python plugin (the fallback without the C++ library), against the real
``tensorrt.plugin`` package on TensorRT-RTX's bindings (tests/plugins/real_trtp.py): registration under the C++
creator's name with the op's attributes and all five inputs (tensorrt.plugin has no optional inputs:
complete_optional_inputs gives a node the missing ones as empty placeholders, which the plugin treats as absent),
output types with TensorRT's fake shape expressions, output shapes with real ``ShapeExpr`` objects (over a stand-in
for the C++ IExprBuilder), type combinations, and (GPU) the real enqueue running the full-op launcher.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
import torch

from tests.helpers import rel_err
from tests.plugins import real_trtp
from torchtrt_ext.backend import python_plugins
from torchtrt_ext.ops import DOMAIN
from torchtrt_ext.ops.deform_conv2d import SPEC, output_size, torch_deform_conv2d
from torchtrt_ext.passes import complete_optional_inputs

ID = "torchtrt_ext::DeformConv2d"
ATTRS = {"stride": np.array([2, 2], np.int32), "padding": np.array([1, 1], np.int32),
         "dilation": np.array([1, 1], np.int32), "groups": 2, "offset_groups": 2}

PER_RELEASE = pytest.mark.parametrize("trt_and_trtp", real_trtp.RELEASES, indirect=True)


@pytest.fixture
def trt_and_trtp(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    """The real package of the newest release, or of the release a test parametrizes it with (``PER_RELEASE``)."""
    python_plugins._dtype_maps.cache_clear()
    trt, trtp = real_trtp.install(monkeypatch, getattr(request, "param", real_trtp.TRTP_VERSION))
    python_plugins.register_python_plugins()
    yield trt, trtp
    real_trtp.deregister(trt, trtp)
    python_plugins._dtype_maps.cache_clear()


@PER_RELEASE
def test_registered_with_every_input_and_the_op_attributes(trt_and_trtp: Any) -> None:
    _, trtp = trt_and_trtp
    definition = trtp._lib.QDP_REGISTRY[ID]
    assert definition.input_tensor_names == list(SPEC.inputs) == ["input", "offset", "weight", "bias", "mask"]
    assert list(definition.input_attrs) == definition.impl_attr_names == [a.name for a in SPEC.attrs]


@pytest.mark.parametrize("ranks", [[4, 4, 4, 1, 1], [4, 4, 4, 1, 4]], ids=["bias-and-mask-absent", "all-present"])
@PER_RELEASE
def test_output_types_with_fake_shape_expressions(trt_and_trtp: Any, ranks: list[int]) -> None:
    """TensorRT infers output types first, with fake ShapeExprs whose values cannot be read (is_constant raises)."""
    trt, trtp = trt_and_trtp
    for dtype in (trt.DataType.FLOAT, trt.DataType.HALF, trt.DataType.BF16):
        plugin = real_trtp.create_plugin(trt, trtp, ID, ATTRS)
        assert plugin.get_output_data_types([dtype] * 5, ranks) == [dtype]


@pytest.mark.parametrize("with_bias,with_mask", [(False, False), (True, False), (True, True)])
def test_output_shapes_on_real_shape_expressions(trt_and_trtp: Any, monkeypatch: pytest.MonkeyPatch,
                                                 with_bias: bool, with_mask: bool) -> None:
    """Real ShapeExprs have no reflected operators (``int * ShapeExpr`` raises TypeError) and say a placeholder is the
    constant 0 through ``is_constant`` (a property) and ``constant_value()`` (a method)."""
    trt, trtp = trt_and_trtp
    plugin = real_trtp.create_plugin(trt, trtp, ID, ATTRS)
    plugin.get_output_data_types([trt.DataType.FLOAT] * 5, [4, 4, 4, 1, 4 if with_mask else 1])
    shapes = [("N", 16, "H", "W"), ("N", 36, "HO", "WO"), (24, 8, 3, 3), (24,) if with_bias else (0,),
              ("N", 18, "HO", "WO") if with_mask else (0,)]
    (dims,) = real_trtp.output_shapes(trt, plugin, shapes, monkeypatch)
    assert [str(d) for d in dims[:2]] == ["N", "24"]
    for h, w in [(9, 11), (8, 8), (3, 4)]:
        env = {"N": 2, "H": h, "W": w}
        got = tuple(d.evaluate(env) for d in dims)
        assert got == (2, 24, *output_size(h, w, (3, 3), (2, 2), (1, 1), (1, 1)))
    static = [(2, 16, 9, 11), (2, 36, 5, 6), (24, 8, 3, 3), (0,), (0,)]
    plugin.get_output_data_types([trt.DataType.FLOAT] * 5, [4, 4, 4, 1, 1])
    (dims,) = real_trtp.output_shapes(trt, plugin, static, monkeypatch)
    assert [d.get_constant_value() for d in dims] == [2, 24, 5, 6]


@PER_RELEASE
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic-hw"])
def test_autotune_offers_one_linear_type_for_all_five_inputs(trt_and_trtp: Any, monkeypatch: pytest.MonkeyPatch,
                                                            dynamic: bool) -> None:
    """With dynamic height/width TensorRT's descs hold -1 for them (``desc.dims``; the range is in min/max): the
    checks must take -1 as unknown, as the C++ plugin does, not as a size giving an empty output."""
    trt, trtp = trt_and_trtp
    plugin = real_trtp.create_plugin(trt, trtp, ID, ATTRS)
    h, w, ho, wo = ("H", "W", "HO", "WO") if dynamic else (9, 11, 5, 6)
    shapes = [(2, 16, h, w), (2, 36, ho, wo), (24, 8, 3, 3), (24,), (0,)]  # mask absent (a placeholder)
    plugin.get_output_data_types([trt.DataType.FLOAT] * 5, [len(s) for s in shapes])
    real_trtp.output_shapes(trt, plugin, shapes, monkeypatch)
    dims = [tuple(-1 if isinstance(d, str) else d for d in s) for s in [*shapes, (2, 24, ho, wo)]]
    in_out = [real_trtp.tensor_desc(trt, s, trt.DataType.FLOAT) for s in dims]
    combos = plugin.get_supported_format_combinations(in_out, 5)
    types = [tuple(c.type for c in combos[i:i + 6]) for i in range(0, len(combos), 6)]
    assert types == [(trt.DataType.FLOAT,) * 6, (trt.DataType.HALF,) * 6, (trt.DataType.BF16,) * 6]
    assert {c.format for c in combos} == {trt.TensorFormat.LINEAR}


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
def test_enqueue_runs_the_full_op_launcher_on_the_given_stream(trt_and_trtp: Any, dtype: torch.dtype,
                                                               with_bias: bool, with_mask: bool) -> None:
    """The real enqueue on device buffers as TensorRT hands them (absent inputs as empty tensors) against the PyTorch
    op."""
    trt, trtp = trt_and_trtp
    trt_type = {torch.float32: trt.DataType.FLOAT, torch.float16: trt.DataType.HALF,
                torch.bfloat16: trt.DataType.BF16}[dtype]
    plugin = real_trtp.create_plugin(trt, trtp, ID, ATTRS)
    plugin.get_output_data_types([trt_type] * 5, [4, 4, 4, 1, 4 if with_mask else 1])
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
    placeholder = torch.empty(256, dtype=torch.uint8, device="cuda")  # TensorRT binds non-null addresses
    real_trtp.enqueue(trt, plugin, [(tuple(t.shape), trt_type, t.data_ptr() or placeholder.data_ptr())
                                    for t in tensors], [(tuple(y.shape), trt_type, y.data_ptr())], stream.cuda_stream)
    stream.synchronize()
    rounded = [None if t is None else t.to(dtype).double() for t in (x, offset, weight, bias, mask)]
    expected = torch_deform_conv2d(*rounded, (2, 2), (1, 1), (1, 1), 2, 2).double()
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
    err = rel_err(y.cpu(), expected)
    assert err < tol, f"{dtype} bias={with_bias} mask={with_mask}: relative error {err:.3g}"
