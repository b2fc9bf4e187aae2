"""The Python-plugin fallback (torchtrt_ext.backend.python_plugins) for machines without the C++ plugin library.

Run against the real ``tensorrt.plugin`` package on TensorRT-RTX's bindings (tests/plugins/real_trtp.py): its
registration checks, its plugin class calling our functions the way TensorRT drives it (output types with fake
shape expressions, output shapes with real ``ShapeExpr`` objects over a stand-in for the C++ IExprBuilder, format
combinations, enqueue). The kernel launch is a recording stand-in on the CPU and the real kernel on a GPU; the
end-to-end engine test needs full TensorRT (marker tensorrt) and skips with the reason elsewhere.
"""
from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest
import torch

from tests.plugins import real_trtp
from torchtrt_ext.backend import python_plugins
from torchtrt_ext.errors import InvalidAttributeError, MissingDependencyError
from torchtrt_ext.ops.l2norm import SPEC, l2norm

ID = "torchtrt_ext::L2Norm"

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


@PER_RELEASE
def test_l2norm_registered_under_the_cpp_creator_name_with_the_op_attributes(trt_and_trtp: Any,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Scalar attributes are declared as 1-element arrays: the creator's fields (what TensorRT's parser fills and
    the engine serializes) are the INT64/FLOAT64 ones an ``int``/``float`` annotation declares, and every release
    reads them back, where before 11.3 an ``int`` annotation is read as ``int(array)``, which numpy >= 2.4 refuses."""
    trt, trtp = trt_and_trtp
    # The creator trtp builds, recorded as it is made: the registry answers with our C++ creator instead wherever an
    # earlier test of this process loaded the C++ library (TensorRT-RTX cannot deregister a library's creators).
    made: list[Any] = []

    class Recorded(trtp._lib._TemplatePluginCreator):  # type: ignore[name-defined,misc]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    real_trtp.deregister(trt, trtp)
    monkeypatch.setattr(trtp._lib, "_TemplatePluginCreator", Recorded)
    assert ID in python_plugins.register_python_plugins()
    definition = trtp._lib.QDP_REGISTRY[ID]  # what the real trtp.register recorded after validating our function
    assert definition.input_tensor_names == list(SPEC.inputs) == ["x"]
    assert list(definition.input_attrs) == [a.name for a in SPEC.attrs] == ["axis", "eps"]
    (creator,) = [c for c in made if c.name == "L2Norm"]
    assert [(f.name, f.type) for f in creator.field_names] == [("axis", trt.PluginFieldType.INT64),
                                                               ("eps", trt.PluginFieldType.FLOAT64)]
    assert definition.impl_attr_names == definition.autotune_attr_names == ["axis", "eps"]
    assert ID in python_plugins.register_python_plugins()  # idempotent: no second register (it would raise)


@PER_RELEASE
def test_output_types_and_shapes_come_from_the_op_definition(trt_and_trtp: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    trt, trtp = trt_and_trtp
    for dtype in (trt.DataType.FLOAT, trt.DataType.HALF, trt.DataType.BF16):
        plugin = real_trtp.create_plugin(trt, trtp, ID, {"axis": -3, "eps": 1e-6})
        assert plugin.get_output_data_types([dtype], [4]) == [dtype]  # fake shape expressions
        (dims,) = real_trtp.output_shapes(trt, plugin, [("N", 64, "H", "W")], monkeypatch)
        assert [str(d) for d in dims] == ["N", "64", "H", "W"]
    plugin = real_trtp.create_plugin(trt, trtp, ID, {"axis": 4, "eps": 1e-6})
    with pytest.raises(InvalidAttributeError, match="dim=4 is out of range for a rank-4 input"):
        plugin.get_output_data_types([trt.DataType.FLOAT], [4])


@PER_RELEASE
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_autotune_offers_linear_float32_float16_bfloat16_only(trt_and_trtp: Any, monkeypatch: pytest.MonkeyPatch,
                                                              dynamic: bool) -> None:
    """Dynamic dims reach autotune as -1 (``desc.dims``)."""
    trt, trtp = trt_and_trtp
    plugin = real_trtp.create_plugin(trt, trtp, ID, {"axis": 1, "eps": 1e-6})
    plugin.get_output_data_types([trt.DataType.FLOAT], [3])
    real_trtp.output_shapes(trt, plugin, [("N", 8, "W") if dynamic else (2, 8, 4)], monkeypatch)
    in_out = [real_trtp.tensor_desc(trt, (-1, 8, -1) if dynamic else (2, 8, 4), trt.DataType.FLOAT)] * 2
    combos = plugin.get_supported_format_combinations(in_out, 1)
    pairs = [(combos[i].type, combos[i + 1].type) for i in range(0, len(combos), 2)]
    assert pairs == [(trt.DataType.FLOAT,) * 2, (trt.DataType.HALF,) * 2, (trt.DataType.BF16,) * 2]
    assert {c.format for c in combos} == {trt.TensorFormat.LINEAR}


def test_enqueue_hands_the_kernel_canonical_attributes_and_the_stream(trt_and_trtp: Any,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The real plugin's enqueue -> our impl -> a recording stand-in for the kernel launcher (CPU machine)."""
    from torchtrt_ext.ops import _l2norm_cuda

    trt, trtp = trt_and_trtp
    calls: list[tuple[Any, ...]] = []
    launched: dict[torch.dtype, Any] = {}

    def launcher(dtype: torch.dtype) -> Any:
        launched[dtype] = True
        return lambda *args: calls.append(args) or 0  # status 0: cudaSuccess

    monkeypatch.setattr(_l2norm_cuda, "_launcher", launcher)
    plugin = real_trtp.create_plugin(trt, trtp, ID, {"axis": -3, "eps": 1e-6})
    plugin.get_output_data_types([trt.DataType.HALF], [4])
    real_trtp.enqueue(trt, plugin, [((3, 40, 7, 5), trt.DataType.HALF, 0x1000)],
                      [((3, 40, 7, 5), trt.DataType.HALF, 0x2000)], stream=0x77)
    assert list(launched) == [torch.float16]
    assert calls == [(0x1000, 0x2000, 3, 40, 35, pytest.approx(1e-6), 0x77)]  # axis -3 -> 1: outer 3, inner 7*5


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_enqueue_runs_the_kernel_on_the_given_stream(trt_and_trtp: Any, dtype: torch.dtype) -> None:
    """The real plugin's enqueue on device buffers against ops.l2norm."""
    trt, trtp = trt_and_trtp
    trt_type = {torch.float32: trt.DataType.FLOAT, torch.float16: trt.DataType.HALF,
                torch.bfloat16: trt.DataType.BF16}[dtype]
    plugin = real_trtp.create_plugin(trt, trtp, ID, {"axis": -3, "eps": 1e-6})
    plugin.get_output_data_types([trt_type], [4])
    x = torch.randn(3, 40, 7, 5, device="cuda", dtype=dtype)
    y = torch.full_like(x, float("nan"))
    stream = torch.cuda.Stream()
    real_trtp.enqueue(trt, plugin, [(tuple(x.shape), trt_type, x.data_ptr())], [(tuple(y.shape), trt_type,
                                                                                y.data_ptr())], stream.cuda_stream)
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


def test_setup_env_unpacks_every_release_the_tests_run_on() -> None:
    script = (real_trtp.ROOT / "scripts" / "setup_env.sh").read_text()
    loop = script.split("for TRTP_VERSION in ", 1)[1].split("; do", 1)[0]
    assert tuple(loop.replace("\\\n", " ").split()) == real_trtp.RELEASES
