"""The native libraries as a user gets them (wheel or source build): the CUDA runtime linked statically with its
symbols hidden, build_info.json telling the truth about it, the import-time CUDA check, and TensorRT-RTX's plugin
registry loading the plugin library. CI runs these against the source build and against the installed wheel
(scripts/test_wheel.sh). Skipped, with the reason, where the libraries were not built."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest

from torchtrt_ext import _native
from torchtrt_ext.errors import CudaMismatchError, LibraryNotFoundError


def _built_info() -> dict[str, object]:
    info = _native.build_info()
    if info is None:
        pytest.skip(f"no native library built (no {_native.BUILD_INFO} in {_native._PACKAGE_LIB_DIR})")
    return info


def _library(find: object) -> str:
    try:
        return str(find())  # type: ignore[operator]
    except LibraryNotFoundError as exc:
        pytest.skip(f"library not built: {exc}")


def test_build_info_names_the_cuda_runtime_linked_in() -> None:
    info = _built_info()
    fn = _native.kernels_library().torchtrt_ext_cuda_runtime_version
    fn.restype = ctypes.c_int32
    version = fn()
    assert f"{version // 1000}.{version % 1000 // 10}" == info["cuda_version"]


@pytest.mark.parametrize("find", [_native.kernels_library_path, _native.plugin_library_path])
def test_cuda_runtime_is_linked_statically_and_hidden(find: object) -> None:
    path = _library(find)
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
    path = _library(_native.plugin_library_path)
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
