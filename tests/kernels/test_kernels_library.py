"""The built libtorchtrt_ext_kernels.so (CPU only): exported symbols and argument checks that need no GPU.

Skipped, with the reason, where the library was not built (no nvcc) or does not load (no CUDA runtime).
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest
import torch

from tests.helpers import kernels_library_or_skip
from torchtrt_ext import _native
from torchtrt_ext.errors import InvalidInputError, LibraryNotFoundError, TorchTRTExtError

LAUNCHERS = ("torchtrt_ext_l2norm_f32", "torchtrt_ext_l2norm_f16", "torchtrt_ext_l2norm_bf16")
CUDA_ERROR_INVALID_VALUE = 1


def _library_path() -> str:
    kernels_library_or_skip()
    return str(_native.kernels_library_path())


def _library() -> ctypes.CDLL:
    return kernels_library_or_skip()


def _dynamic_symbols(path: str) -> dict[str, str]:
    """{name: nm type letter} of the defined dynamic symbols, names demangled."""
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) not installed")
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", path], check=True, capture_output=True, text=True)
    symbols = {}
    for line in out.stdout.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) == 3:
            symbols[parts[2]] = parts[1]
    return symbols


def test_launchers_are_exported_as_c_functions() -> None:
    symbols = _dynamic_symbols(_library_path())
    for name in LAUNCHERS:
        assert symbols.get(name) == "T", f"{name} is not an exported function of the kernels library"


def test_the_regular_build_has_no_deform_conv2d_trace_reader() -> None:
    symbols = _dynamic_symbols(_library_path())
    assert "torchtrt_ext_deform_conv2d_trace" not in symbols, (
        "this kernels library is the diagnostic build (setup.py's TORCHTRT_EXT_DCN_TRACE=1): rebuild it without")


def test_internal_symbols_stay_hidden() -> None:
    symbols = _dynamic_symbols(_library_path())
    leaked = [name for name in symbols if "l2norm_detail" in name or name.startswith("torchtrt_ext::")]
    assert not leaked, f"internal C++ symbols exported (setup.py builds with -fvisibility=hidden): {leaked[:5]}"


def _call(name: str, x: int | None, y: int | None, outer: int, reduced: int, inner: int) -> int:
    fn = getattr(_library(), name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                   ctypes.c_float, ctypes.c_void_p]
    fn.restype = ctypes.c_int32
    return int(fn(x, y, outer, reduced, inner, 1e-6, None))


@pytest.mark.parametrize("name", LAUNCHERS)
@pytest.mark.parametrize("outer, reduced, inner", [
    (-1, 4, 4), (4, 0, 4), (4, -3, 4), (4, 4, -1), (2**40, 2**20, 2**10),  # negative, empty axis, overflow
])
def test_bad_sizes_are_rejected_without_touching_the_gpu(name: str, outer: int, reduced: int, inner: int) -> None:
    # invalid sizes are refused before any CUDA call, so dummy (never dereferenced) pointers are fine here
    assert _call(name, 16, 16, outer, reduced, inner) == CUDA_ERROR_INVALID_VALUE


@pytest.mark.parametrize("name", LAUNCHERS)
def test_null_pointer_is_rejected(name: str) -> None:
    assert _call(name, None, 16, 2, 3, 4) == CUDA_ERROR_INVALID_VALUE
    assert _call(name, 16, None, 2, 3, 4) == CUDA_ERROR_INVALID_VALUE


@pytest.mark.parametrize("name", LAUNCHERS)
@pytest.mark.parametrize("outer, inner", [(0, 4), (4, 0)])
def test_empty_tensor_is_a_no_op(name: str, outer: int, inner: int) -> None:
    assert _call(name, None, None, outer, 3, inner) == 0


def test_error_text_names_the_cuda_status() -> None:
    _library()
    text = _native.cuda_error_text(CUDA_ERROR_INVALID_VALUE)
    assert "cudaErrorInvalidValue" in text and "(1)" in text
    with pytest.raises(TorchTRTExtError, match=r"my_launcher returned cudaErrorInvalidValue \(1\).*Remedy: fix it"):
        _native.check_kernel_status(1, "my_launcher", "fix it")


def test_eager_path_rejects_cpu_tensors_with_a_remedy() -> None:
    from torchtrt_ext.ops._l2norm_cuda import l2norm_cuda

    with pytest.raises(InvalidInputError, match="a float32, float16 or bfloat16 CUDA tensor.*Remedy: use torchtrt_ext"):
        l2norm_cuda(torch.ones(2, 3), 1, 1e-6)


def test_a_missing_library_fails_where_a_gpu_is_present(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the GPU tests get from kernels_library_or_skip: a failure on a CUDA machine, a skip elsewhere."""
    def missing() -> ctypes.CDLL:
        raise LibraryNotFoundError("libtorchtrt_ext_kernels.so not found in torchtrt_ext/lib")

    monkeypatch.setattr(_native, "kernels_library", missing)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(pytest.fail.Exception, match="a CUDA GPU is present but the kernels library is missing"):
        kernels_library_or_skip()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(pytest.skip.Exception, match="kernels library not built or not loadable here"):
        kernels_library_or_skip()
