"""The native libraries as a user gets them (wheel or source build): the CUDA runtime linked statically with its
symbols hidden, build_info.json telling the truth about it, the import-time CUDA check, and TensorRT-RTX's plugin
registry loading the plugin library. CI runs these against the source build and against the installed wheel
(scripts/test_wheel.sh). Skipped, with the reason, where the libraries could not be built (no nvcc; for the plugin
library, no TensorRT headers); where setup.py would have built one, its absence FAILS the test (a broken build must
not hide behind a skip), as the plugin and kernel tests' library fixtures do."""
from __future__ import annotations

import ctypes
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import _setup_py
from torchtrt_ext import _native
from torchtrt_ext.errors import CudaMismatchError, LibraryNotFoundError


#: what a test needs -> the torchtrt_ext._native function that finds it
LOOKUPS = {"kernels library": "kernels_library_path", "plugin library": "plugin_library_path"}


def _why_built(what: str) -> str | None:
    """Why setup.py would have built `what` here (nvcc found; for the plugin library also the TensorRT headers), or
    None where it would have skipped it."""
    setup = _setup_py()
    nvcc = setup.find_nvcc()
    if nvcc is None:
        return None
    if what != "plugin library":
        return f"nvcc is here ({nvcc})"
    include, _ = setup.find_trt_include()
    return None if include is None else f"nvcc ({nvcc}) and the TensorRT headers ({include}) are here"


def _missing(what: str, detail: str) -> None:
    """Fail where the build should have produced `what`, else skip; either way say why."""
    why = _why_built(what)
    if why is not None:
        pytest.fail(f"{why}, so the build should have produced the {what}, but: {detail}", pytrace=False)
    pytest.skip(f"{what} not built (setup.py skips it without nvcc or, for the plugin library, the TensorRT "
                f"headers): {detail}")


def _built_info() -> dict[str, object]:
    info = _native.build_info()
    if info is None:
        _missing(_native.BUILD_INFO, f"no {_native.BUILD_INFO} in {_native._PACKAGE_LIB_DIR}")
    assert info is not None
    return info


def _library(what: str) -> str:
    """The path of `what` (a key of LOOKUPS); a failure or a skip, saying why, where it is missing."""
    try:
        return str(getattr(_native, LOOKUPS[what])())
    except LibraryNotFoundError as exc:
        _missing(what, str(exc))
        raise


@pytest.mark.parametrize("what", list(LOOKUPS))
def test_a_missing_library_fails_where_the_build_should_have_made_it(monkeypatch: pytest.MonkeyPatch,
                                                                     what: str) -> None:
    """What the tests below get from _library: a failure where setup.py would have built the library (nvcc, and for
    the plugin library the TensorRT headers), a skip where it would not have."""
    def missing() -> None:
        raise LibraryNotFoundError(f"{what} not found in torchtrt_ext/lib")

    setup = _setup_py()
    monkeypatch.setattr(_native, LOOKUPS[what], missing)
    monkeypatch.setattr(sys.modules[__name__], "_setup_py", lambda: setup)
    monkeypatch.setattr(setup, "find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
    monkeypatch.setattr(setup, "find_trt_include", lambda: (Path("/opt/tensorrt/include"), ["/opt/tensorrt/include"]))
    with pytest.raises((pytest.fail.Exception, pytest.skip.Exception)) as outcome:  # a skip must fail this test
        _library(what)
    assert outcome.type is pytest.fail.Exception, f"skipped instead of failing: {outcome.value}"
    assert re.search(rf"nvcc .*here.*should have produced the {what}, but: {what} not found", str(outcome.value))
    monkeypatch.setattr(setup, "find_nvcc", lambda: None)
    with pytest.raises(pytest.skip.Exception, match=rf"{what} not built"):
        _library(what)
    if what == "plugin library":  # nvcc but no headers: setup.py skips the plugin library, and so does the test
        monkeypatch.setattr(setup, "find_nvcc", lambda: "/usr/local/cuda/bin/nvcc")
        monkeypatch.setattr(setup, "find_trt_include", lambda: (None, ["/nowhere"]))
        with pytest.raises(pytest.skip.Exception, match="plugin library not built"):
            _library(what)


def test_build_info_names_the_cuda_runtime_linked_in() -> None:
    info = _built_info()
    fn = _native.kernels_library().torchtrt_ext_cuda_runtime_version
    fn.restype = ctypes.c_int32
    version = fn()
    assert f"{version // 1000}.{version % 1000 // 10}" == info["cuda_version"]


@pytest.mark.parametrize("what", list(LOOKUPS))
def test_cuda_runtime_is_linked_statically_and_hidden(what: str) -> None:
    path = _library(what)
    needed = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
    assert "libcudart" not in needed, f"{path} needs a shared CUDA runtime:\n{needed}"
    exported = subprocess.run(["nm", "-D", "--defined-only", path], check=True, capture_output=True, text=True).stdout
    leaked = [line.split()[-1] for line in exported.splitlines() if line.split()[-1].startswith(("cuda", "__cuda"))]
    assert not leaked, f"{path} exports CUDA runtime symbols, which could bind to torch's runtime: {leaked[:5]}"


@pytest.mark.parametrize(("torch_cuda", "info"), [
    (None, {"cuda_version": "13.0"}),  # a CPU torch: nothing to match
    ("13.0", None),                    # no library built
    ("13.2", {"cuda_version": "13.0"}),  # minor versions differ: the driver, not us, decides
    ("12.8", {"cuda_version": "12.9"}),
])
def test_matching_or_unknown_cuda_passes(torch_cuda: str | None, info: dict[str, str] | None) -> None:
    _native.check_cuda_runtime(torch_cuda, info)


@pytest.mark.parametrize(("torch_cuda", "built", "right"), [("12.8", "13.0", 12), ("13.0", "12.9", 13)])
def test_mismatch_names_the_right_wheel(torch_cuda: str, built: str, right: int) -> None:
    with pytest.raises(CudaMismatchError, match=rf"built for CUDA {built} \(torchtrt_ext-cu{int(built[:2])}\), but "
                                                rf"torch uses CUDA {torch_cuda}.*Expected: .*torchtrt_ext-cu{right}\. "
                                                rf"Remedy: pip uninstall \S+ && pip install torchtrt_ext-cu{right}"):
        _native.check_cuda_runtime(torch_cuda, {"cuda_version": built})


def _import_with_torch_cuda(version: str) -> subprocess.CompletedProcess[str]:
    """Import torchtrt_ext in a fresh interpreter whose torch.version.cuda is `version`: a stand-in for a torch
    built for that CUDA (this machine's torch is a CPU build); everything after that line is the real import."""
    code = f"import torch; torch.version.cuda = {version!r}; import torchtrt_ext"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


def test_import_refuses_a_torch_of_another_cuda_major() -> None:
    built = int(str(_built_info()["cuda_version"]).split(".")[0])
    other = 12 if built == 13 else 13
    result = _import_with_torch_cuda(f"{other}.8")
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("torchtrt_ext.errors.CudaMismatchError: "), result.stderr
    assert f"pip install torchtrt_ext-cu{other} " in last and f"({_native.wheel_name(built)})" in last, last


def test_import_accepts_a_torch_of_the_same_cuda_major() -> None:
    built = str(_built_info()["cuda_version"])
    result = _import_with_torch_cuda(built)
    assert result.returncode == 0, result.stderr


def test_tensorrt_rtx_registry_loads_the_plugin_library() -> None:
    """The real TensorRT-RTX plugin registry loads the library plugin_library_path() gives and lists our creators
    (in a child process: a registry keeps what it loaded for the life of the process)."""
    pytest.importorskip("tensorrt_rtx", reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
    path = _library("plugin library")
    code = textwrap.dedent(f"""
        import json
        import tensorrt_rtx as trt
        trt.Logger(trt.Logger.WARNING)
        registry = trt.get_plugin_registry()
        registry.load_library({path!r})
        print(json.dumps(sorted([c.name, c.plugin_version, c.plugin_namespace] for c in registry.all_creators)))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    creators = json.loads(result.stdout.strip().splitlines()[-1])
    assert ["L2Norm", "1", "torchtrt_ext"] in creators and ["DeformConv2d", "1", "torchtrt_ext"] in creators, creators
