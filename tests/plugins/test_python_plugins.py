"""The Python-plugin fallback (torchtrt_ext.backend.python_plugins) for machines without the C++ plugin library.

Without TensorRT, a stand-in for tensorrt.plugin (tests/plugins/_fake_trtp.py) checks what the real one checks
about the functions handed to it and calls them the way it does. The end-to-end engine test needs full TensorRT
(marker tensorrt) and skips with the reason elsewhere.
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
from typing import Any

import pytest
import torch

from torchtrt_ext.backend import python_plugins
from torchtrt_ext.errors import InvalidAttributeError, MissingDependencyError
from torchtrt_ext.ops.l2norm import SPEC, l2norm


def test_without_tensorrt_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # import tensorrt raises ImportError
    with pytest.raises(MissingDependencyError, match=r"TensorRT.*Remedy: pip install 'torchtrt_ext\[trt\]'"):
        python_plugins.register_python_plugins()


def test_tensorrt_without_tensorrt_plugin_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    old = types.ModuleType("tensorrt")
    old.__version__ = "10.3.0"
    monkeypatch.setitem(sys.modules, "tensorrt", old)
    monkeypatch.setitem(sys.modules, "tensorrt.plugin", None)
    with pytest.raises(MissingDependencyError, match=r"tensorrt 10.3.0 has no tensorrt.plugin.*>= 10.6"):
        python_plugins.register_python_plugins()


def test_l2norm_registered_under_the_cpp_creator_name_with_the_op_attributes(fake_trtp: Any) -> None:
    assert "torchtrt_ext::L2Norm" in python_plugins.register_python_plugins()
    plugin = fake_trtp.REGISTRY["torchtrt_ext::L2Norm"]
    assert plugin.tensors == list(SPEC.inputs) == ["x"]
    assert plugin.attrs == {"axis": int, "eps": float}  # names and order of the op definition's attributes
    assert [a.name for a in SPEC.attrs] == list(plugin.attrs)
    assert list(inspect.signature(plugin.impl).parameters) == ["x", "axis", "eps", "outputs", "stream"]
    assert list(inspect.signature(plugin.autotune).parameters) == ["x", "axis", "eps", "outputs"]
    assert "torchtrt_ext::L2Norm" in python_plugins.register_python_plugins()  # idempotent: no second register


def test_output_shape_and_dtype_come_from_the_op_definition(fake_trtp: Any) -> None:
    python_plugins.register_python_plugins()
    plugin = fake_trtp.REGISTRY["torchtrt_ext::L2Norm"]
    n, h, w = fake_trtp.Sym("N"), fake_trtp.Sym("H"), fake_trtp.Sym("W") * 2
    for dtype in (fake_trtp.DataType.FLOAT, fake_trtp.DataType.HALF, fake_trtp.DataType.BF16):
        out = plugin.descs([fake_trtp.TensorDesc((n, 64, h, w), dtype)], {"axis": -3, "eps": 1e-6})
        assert out.shape_expr == (n, 64, h, w) and out.dtype == dtype
    with pytest.raises(InvalidAttributeError, match="dim=4 is out of range for a rank-4 input"):
        plugin.descs([fake_trtp.TensorDesc((n, 64, h, w), fake_trtp.DataType.FLOAT)], {"axis": 4, "eps": 1e-6})


def test_autotune_offers_linear_float32_float16_bfloat16_only(fake_trtp: Any) -> None:
    python_plugins.register_python_plugins()
    plugin = fake_trtp.REGISTRY["torchtrt_ext::L2Norm"]
    x = fake_trtp.TensorDesc((2, 8, 4), fake_trtp.DataType.FLOAT)
    combos = plugin.combinations([x], {"axis": 1, "eps": 1e-6}, (fake_trtp.TensorDesc((2, 8, 4)),))
    assert [(c.io_types, c.layouts) for c in combos] == [
        (["FP32", "FP32"], ["LINEAR"]), (["FP16", "FP16"], ["LINEAR"]), (["BF16", "BF16"], ["LINEAR"])]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_impl_runs_the_kernel_on_the_given_stream(fake_trtp: Any, dtype: torch.dtype) -> None:
    """The impl on real device buffers (as TensorRT would hand them) against ops.l2norm."""
    python_plugins.register_python_plugins()
    plugin = fake_trtp.REGISTRY["torchtrt_ext::L2Norm"]
    trt_type = {torch.float32: fake_trtp.DataType.FLOAT, torch.float16: fake_trtp.DataType.HALF,
                torch.bfloat16: fake_trtp.DataType.BF16}[dtype]
    x = torch.randn(3, 40, 7, 5, device="cuda", dtype=dtype)
    y = torch.full_like(x, float("nan"))
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        plugin.run([fake_trtp.Tensor(x.data_ptr(), x.shape, trt_type)], {"axis": -3, "eps": 1e-6},
                   (fake_trtp.Tensor(y.data_ptr(), y.shape, trt_type),), stream=stream.cuda_stream)
    stream.synchronize()
    expected = l2norm(x.cpu(), dim=1, eps=1e-6).float()
    tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1e-2}[dtype]
    err = ((y.cpu().float() - expected).abs() / expected.abs().clamp_min(1e-3)).max().item()
    assert err < tol, err


@pytest.mark.tensorrt
@pytest.mark.gpu
def test_engine_with_python_plugin_matches_pytorch(tmp_path: Any) -> None:
    """Full TensorRT: the exported L2Norm node parsed through the Python plugin, built, run, compared."""
    import tensorrt as trt

    import torchtrt_ext

    if importlib.util.find_spec("tensorrt.plugin") is None:
        pytest.skip("tensorrt.plugin (TensorRT >= 10.6) is not available")
    python_plugins.register_python_plugins()
    model = torchtrt_ext.nn.L2Norm(dim=1, eps=1e-6).eval()
    x = torch.randn(2, 16, 5, 5)
    onnx_model = torchtrt_ext.export_onnx(model, (x,))
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(onnx_model.SerializeToString()), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    name = network.get_input(0).name
    profile.set_shape(name, (1, 16, 5, 5), (2, 16, 5, 5), (4, 16, 5, 5))
    config.add_optimization_profile(profile)
    engine = trt.Runtime(logger).deserialize_cuda_engine(builder.build_serialized_network(network, config))
    context = engine.create_execution_context()
    xc = x.cuda()
    y = torch.empty_like(xc)
    context.set_input_shape(name, tuple(xc.shape))
    context.set_tensor_address(name, xc.data_ptr())
    context.set_tensor_address(network.get_output(0).name, y.data_ptr())
    stream = torch.cuda.current_stream()
    assert context.execute_async_v3(stream.cuda_stream)
    stream.synchronize()
    torch.testing.assert_close(y.cpu(), torch.nn.functional.normalize(x, dim=1, eps=1e-6), rtol=1e-5, atol=1e-6)
