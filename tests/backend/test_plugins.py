"""plugins= resolution on a plugin-capable backend (a stand-in TRTApi: no TensorRT needed) and on TensorRT-RTX."""
from __future__ import annotations

import logging
import types
from pathlib import Path

import onnx
import pytest

from tests.helpers import raw_custom_graph
from tests.plugins import real_trtp
from torchtrt_ext import _native
from torchtrt_ext.backend import plugins as plugin_modes
from torchtrt_ext.backend import python_plugins as python_plugin_module
from torchtrt_ext.backend.adapter import TRTApi, load_backend
from torchtrt_ext.backend.plugin_plan import OpPlan
from torchtrt_ext.errors import BuildError, LibraryNotFoundError, MissingDependencyError
from torchtrt_ext.ops.l2norm import SPEC as L2NORM_SPEC

FAKE_TRT = TRTApi("tensorrt", types.SimpleNamespace(__version__="10.13.0"))


@pytest.fixture
def no_cpp_library(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> Path:
        raise LibraryNotFoundError("libtorchtrt_ext_plugins.so not found")

    monkeypatch.setattr(_native, "plugin_library_path", missing)


@pytest.fixture
def python_plugins(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    plugin_modes._register_python_once.cache_clear()
    monkeypatch.setattr(plugin_modes, "python_plugins_entry", lambda: lambda: calls.append(1))
    yield calls
    plugin_modes._register_python_once.cache_clear()


@pytest.fixture
def no_python_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable() -> None:
        raise MissingDependencyError("tensorrt.plugin needs TensorRT >= 10.6")

    plugin_modes._register_python_once.cache_clear()
    monkeypatch.setattr(plugin_modes, "python_plugins_entry", unavailable)
    yield
    plugin_modes._register_python_once.cache_clear()


@pytest.fixture
def custom() -> onnx.ModelProto:
    return raw_custom_graph()


def test_auto_prefers_the_cpp_library(cpp_library: Path, custom: onnx.ModelProto,
                                      caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        plan = plugin_modes.resolve_plugin_plan("auto", FAKE_TRT, custom)
    assert plan.mode == "cpp" and plan.library == cpp_library and plan.library_sha256 is not None
    assert [(op.plugin.name, op.plugin.version, op.plugin.namespace, op.route) for op in plan.ops] == [
        ("L2Norm", "1", "torchtrt_ext", "cpp")]
    assert "plugins='auto': using the C++ plugin library" in caplog.text


def test_auto_falls_back_to_python_plugins(no_cpp_library: None, python_plugins: list[int],
                                           custom: onnx.ModelProto, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        plan = plugin_modes.resolve_plugin_plan("auto", FAKE_TRT, custom)
    assert plan.mode == "python" and python_plugins == [1]
    assert "C++ plugin library not built, using the Python plugins for L2Norm" in caplog.text


def test_auto_without_any_plugin_says_what_to_do(no_cpp_library: None, no_python_plugins: None,
                                                 custom: onnx.ModelProto) -> None:
    with pytest.raises(BuildError, match=r"found no way to run L2Norm.*C\+\+: libtorchtrt_ext_plugins.so not found.*"
                                         r"Python: tensorrt.plugin needs TensorRT >= 10.6.*plugins='decompose'"):
        plugin_modes.resolve_plugin_plan("auto", FAKE_TRT, custom)


def test_explicit_modes(no_cpp_library: None, custom: onnx.ModelProto) -> None:
    with pytest.raises(LibraryNotFoundError):
        plugin_modes.resolve_plugin_plan("cpp", FAKE_TRT, custom)
    assert plugin_modes.resolve_plugin_plan("decompose", FAKE_TRT, custom).mode == "decompose"


def test_no_custom_nodes_means_no_plugins(conv_onnx: onnx.ModelProto) -> None:
    assert plugin_modes.resolve_plugin_plan("auto", FAKE_TRT, conv_onnx).mode == "none"


def test_auto_without_the_cpp_library_registers_in_the_real_tensorrt_plugin(no_cpp_library: None,
                                                                          custom: onnx.ModelProto,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The real ``tensorrt.plugin`` package (tests/plugins/real_trtp.py): 'auto' without the C++ library registers
    our Python plugin for L2Norm there, and the plan routes L2Norm to it."""
    trt, trtp = real_trtp.install(monkeypatch)
    python_plugin_module._dtype_maps.cache_clear()
    plugin_modes._register_python_once.cache_clear()
    try:
        assert not trtp._lib.QDP_CREATORS  # nothing registered by an earlier test
        plan = plugin_modes.resolve_plugin_plan("auto", FAKE_TRT, custom)
        assert plan.mode == "python" and [(op.plugin.name, op.route) for op in plan.ops] == [("L2Norm", "python")]
        assert "torchtrt_ext::L2Norm" in trtp._lib.QDP_CREATORS
    finally:
        real_trtp.deregister(trt, trtp)
        python_plugin_module._dtype_maps.cache_clear()
        plugin_modes._register_python_once.cache_clear()


def test_a_library_tensorrt_cannot_load_raises_and_is_not_cached(rtx: str, tmp_path: Path) -> None:
    """TensorRT-RTX's real plugin registry: ``load_library`` returns None (it does not raise) for a file it cannot
    load."""
    try:  # TensorRT-RTX loads plugin libraries only once this shim gives its parser libtensorrt_rtx.so
        _native.rtx_alias_library_path()
    except LibraryNotFoundError as exc:
        pytest.skip(f"the RTX alias library is not built here: {exc}")
    real = load_backend(rtx)
    bad = tmp_path / "libbroken.so"
    bad.write_bytes(b"not a shared library")
    l2norm = OpPlan(L2NORM_SPEC.plugin_ref, "cpp")  # an op the C++ library serves, so load_plugins loads it
    plan = plugin_modes.PluginPlan("cpp", bad, None, (l2norm,))
    for _ in range(2):  # a failure must not be remembered as a success
        with pytest.raises(LibraryNotFoundError, match=r"could not load the plugin library .*libbroken\.so.*ldd"):
            plugin_modes.load_plugins(real, plan)
    try:
        library = _native.plugin_library_path()
    except LibraryNotFoundError as exc:
        pytest.skip(f"the C++ plugin library is not built here: {exc}")
    real.load_plugin_library(str(library))  # the real library loads without error
    real.load_plugin_library(str(library))  # and again: the registry would return None, the adapter knows it is in
    assert real.trt.get_plugin_registry().load_library(str(library)) is None  # what a second raw load gives


_MIX = """
import sys
from tests.plugins import real_trtp
modules = real_trtp._load(real_trtp.TRTP_VERSION)
if isinstance(modules, str):
    print("SKIP", modules); sys.exit(0)
sys.modules.update(modules)
import tensorrt_rtx
from torchtrt_ext import _native
from torchtrt_ext.backend import plugins
from torchtrt_ext.backend.adapter import TRTApi
from torchtrt_ext.errors import BuildError
api = TRTApi("tensorrt", tensorrt_rtx)  # the real registry; labelled "tensorrt" to pass the RTX plugin refusal
from torchtrt_ext.backend.plugin_plan import OpPlan
from torchtrt_ext.ops.l2norm import SPEC
cpp = plugins.PluginPlan("cpp", _native.plugin_library_path(), ops=(OpPlan(SPEC.plugin_ref, "cpp"),))
python = plugins.PluginPlan("python", ops=(OpPlan(SPEC.plugin_ref, "python"),))
first, second = (cpp, python) if sys.argv[1] == "cpp-first" else (python, cpp)
plugins.load_plugins(api, first)
print("REGISTERED", plugins.registered_plugin_mode(api, [SPEC.plugin_ref]))
from tests.helpers import raw_custom_graph
from tests.plugins import real_trtp
print("AUTO", plugins.resolve_plugin_plan("auto", api, raw_custom_graph()).mode)
try:
    plugins.load_plugins(api, second)
except BuildError as exc:
    print("REFUSED", exc)
"""


@pytest.mark.parametrize("order", ["cpp-first", "python-first"])
def test_one_plugin_mode_per_process_in_the_real_registry(rtx: str, order: str) -> None:
    """TensorRT-RTX's real registry with our real C++ library and the real tensorrt.plugin creators, in a fresh
    process each (the registry is process-wide): the second mode is refused instead of silently running the first."""
    import subprocess
    import sys

    try:
        _native.plugin_library_path()
    except LibraryNotFoundError as exc:
        pytest.skip(f"the C++ plugin library is not built here: {exc}")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _MIX, order], cwd=root, capture_output=True, text=True, timeout=300)
    if done.stdout.startswith("SKIP"):
        pytest.skip(done.stdout)
    first, second = ("cpp", "python") if order == "cpp-first" else ("python", "cpp")
    assert f"REGISTERED {first}" in done.stdout, done.stdout + done.stderr
    assert f"AUTO {first}" in done.stdout  # 'auto' takes the mode this process registered
    assert (f"REFUSED plugins={second!r}, but the {first} plugins already registered L2Norm in this process's "
            "tensorrt plugin registry") in done.stdout, done.stdout + done.stderr
