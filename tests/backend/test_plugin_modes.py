"""plugins= resolution on a plugin-capable backend (a stand-in TRTApi: no TensorRT needed) and on TensorRT-RTX."""
from __future__ import annotations

import logging
import types
from pathlib import Path

import onnx
import pytest

from tests.backend.conftest import raw_custom_graph
from torchtrt_ext import _native
from torchtrt_ext.backend import plugins as plugin_modes
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
        plan = plugin_modes.resolve_plugin_mode("auto", FAKE_TRT, custom)
    assert plan.mode == "cpp" and plan.library == cpp_library and plan.library_sha256 is not None
    assert [(op.plugin.name, op.plugin.version, op.plugin.namespace, op.route) for op in plan.ops] == [
        ("L2Norm", "1", "torchtrt_ext", "cpp")]
    assert "plugins='auto': using the C++ plugin library" in caplog.text


def test_auto_falls_back_to_python_plugins(no_cpp_library: None, python_plugins: list[int],
                                           custom: onnx.ModelProto, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        plan = plugin_modes.resolve_plugin_mode("auto", FAKE_TRT, custom)
    assert plan.mode == "python" and python_plugins == [1]
    assert "C++ plugin library not built, using the Python plugins for L2Norm" in caplog.text


def test_auto_without_any_plugin_says_what_to_do(no_cpp_library: None, no_python_plugins: None,
                                                 custom: onnx.ModelProto) -> None:
    with pytest.raises(BuildError, match=r"found no way to run L2Norm.*C\+\+: libtorchtrt_ext_plugins.so not found.*"
                                         r"Python: tensorrt.plugin needs TensorRT >= 10.6.*plugins='decompose'"):
        plugin_modes.resolve_plugin_mode("auto", FAKE_TRT, custom)


def test_explicit_modes(no_cpp_library: None, custom: onnx.ModelProto) -> None:
    with pytest.raises(LibraryNotFoundError):
        plugin_modes.resolve_plugin_mode("cpp", FAKE_TRT, custom)
    assert plugin_modes.resolve_plugin_mode("decompose", FAKE_TRT, custom).mode == "decompose"


def test_no_custom_nodes_means_no_plugins(conv_onnx: onnx.ModelProto) -> None:
    assert plugin_modes.resolve_plugin_mode("auto", FAKE_TRT, conv_onnx).mode == "none"


def test_python_plugins_module_is_the_one_compile_uses() -> None:
    """The entry point name the Python-plugin issue exposes is the one this module calls."""
    entry = plugin_modes.python_plugins_entry()
    assert entry.__name__ == "register_python_plugins"


def test_a_library_tensorrt_cannot_load_raises_and_is_not_cached(rtx: str, tmp_path: Path) -> None:
    """TensorRT-RTX's real plugin registry: ``load_library`` returns None (it does not raise) for a file it cannot load.
    The api is labelled "tensorrt" only to pass the RTX plugin refusal; the registry and the call are RTX's own."""
    real = TRTApi("tensorrt", load_backend(rtx).trt)
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
