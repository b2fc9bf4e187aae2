"""Shared test configuration: markers that skip, with the reason, where the machine lacks a GPU or TensorRT, the
seeded random state and the isolated engine cache every test starts from, and the TensorRT-RTX fixtures (the backend
name, two small exported models) the backend, runtime and cache tests share."""
from __future__ import annotations

import functools
import importlib.util
import random
import zlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import onnx

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


@pytest.fixture(autouse=True)
def seeded(request: pytest.FixtureRequest) -> int:
    """Seed Python's, NumPy's and torch's (CPU and CUDA) random generators from the test's id before every test, so
    each test draws its own data and a failure reproduces run after run. Returns the seed."""
    import numpy as np
    import torch

    seed = zlib.crc32(request.node.nodeid.encode())
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return seed


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own engine cache folder (never the user's ~/.cache)."""
    folder = tmp_path / "engine_cache"
    monkeypatch.setenv("TORCHTRT_EXT_CACHE_DIR", str(folder))
    monkeypatch.delenv("TORCHTRT_EXT_CACHE", raising=False)
    return folder


@pytest.fixture(scope="session")
def rtx() -> str:
    """The backend name "tensorrt_rtx", skipping where it is not installed (CI installs tensorrt-rtx-cu13)."""
    if importlib.util.find_spec("tensorrt_rtx") is None:
        pytest.skip("tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
    from torchtrt_ext.backend.adapter import load_backend

    load_backend("tensorrt_rtx")
    return "tensorrt_rtx"


@pytest.fixture(scope="session")
def conv_onnx() -> onnx.ModelProto:
    """A conv + relu model, exported with a dynamic batch; its input is named "x"."""
    import torch

    import torchtrt_ext
    from tests.helpers import SmallConv

    torch.manual_seed(0)
    return torchtrt_ext.export_onnx(SmallConv().eval(), (torch.randn(2, 3, 8, 8),))


@pytest.fixture(scope="session")
def l2norm_onnx() -> onnx.ModelProto:
    """Conv + torchtrt_ext L2Norm, exported by the project's exporter (one custom node)."""
    import torch

    import torchtrt_ext
    from tests.helpers import ConvL2Norm

    torch.manual_seed(0)
    model = torchtrt_ext.export_onnx(ConvL2Norm().eval(), (torch.randn(2, 3, 8, 8),))
    assert [n.op_type for n in model.graph.node if n.domain == "torchtrt_ext"] == ["L2Norm"]
    return model


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
