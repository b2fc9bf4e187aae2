"""Shared test configuration: markers that skip, with the reason, where the machine lacks a GPU or TensorRT."""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

_ROOT = Path(__file__).resolve().parent.parent


def _gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    return None if torch.cuda.is_available() else "no CUDA GPU on this machine (torch.cuda.is_available() is False)"


def _tensorrt_reason() -> str | None:
    if importlib.util.find_spec("tensorrt") is None:
        return "full TensorRT is not installed (pip install 'torchtrt_ext[trt]' on a machine that can fetch it)"
    try:
        import tensorrt
    except Exception as exc:  # the bindings install but cannot load without the libraries
        return f"tensorrt does not import here: {exc}"
    if not hasattr(tensorrt, "Builder"):  # e.g. only tensorrt-stubs' .pyi files: an empty namespace package
        return "the installed 'tensorrt' has no Builder (stubs or a broken install), not a TensorRT runtime"
    return None


@functools.lru_cache(maxsize=None)
def _setup_py() -> ModuleType:
    """setup.py as a module (its setup() call runs only as __main__), for its own header search."""
    spec = importlib.util.spec_from_file_location("torchtrt_ext_setup_py", _ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trt_include_dir() -> tuple[Path | None, list[str]]:
    """(folder holding NvInfer.h or None, folders looked in): setup.py's find_trt_include, so a test skips exactly
    where the build skipped the plugin library."""
    found, looked = _setup_py().find_trt_include()
    return found, looked


def _trt_headers_reason() -> str | None:
    found, looked = trt_include_dir()
    return None if found else ("TensorRT headers (NvInfer.h) not found in " + ", ".join(looked)
                               + "; set TORCHTRT_EXT_TRT_INCLUDE to the folder holding NvInfer.h")


@pytest.fixture(scope="session")
def trt_include() -> Path:
    """The folder holding NvInfer.h (tests using it are marked trt_headers, so they skip where there is none)."""
    found, looked = trt_include_dir()
    if found is None:
        pytest.skip(f"TensorRT headers not found in {', '.join(looked)}")
    return found


@pytest.fixture
def cpp_library(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A stand-in file where torchtrt_ext looks for libtorchtrt_ext_plugins.so: plugin plans read only its hash."""
    from torchtrt_ext import _native

    library = tmp_path / "libtorchtrt_ext_plugins.so"
    library.write_bytes(b"not really a library")
    monkeypatch.setattr(_native, "plugin_library_path", lambda: library)
    return library


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reasons = {"gpu": _gpu_reason, "tensorrt": _tensorrt_reason, "trt_headers": _trt_headers_reason}
    cache: dict[str, str | None] = {}
    for item in items:
        for name, probe in reasons.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in cache:
                cache[name] = probe()
            if cache[name]:
                item.add_marker(pytest.mark.skip(reason=cache[name]))
