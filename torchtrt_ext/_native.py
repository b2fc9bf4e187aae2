"""Find and load the native libraries built by setup.py (CUDA kernels, TensorRT plugins).

Importing this module checks that those libraries were built for the CUDA major version of torch's runtime (see
``check_cuda_runtime``): the CUDA 12 and CUDA 13 wheels are ``torchtrt_ext-cu12`` and ``torchtrt_ext-cu13``.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.metadata
import json
import os
from pathlib import Path
from typing import Any

import torch

from torchtrt_ext.errors import CudaMismatchError, KernelError, LibraryNotFoundError, TorchTRTExtError, failure

KERNELS_LIB = "libtorchtrt_ext_kernels.so"
PLUGINS_LIB = "libtorchtrt_ext_plugins.so"
PLUGINS_AUTOLOAD_LIB = "libtorchtrt_ext_plugins_autoload.so"
BUILD_INFO = "build_info.json"
RTX_ALIAS_LIB = "libtorchtrt_ext_rtx_alias.so"
_PACKAGE_LIB_DIR = Path(__file__).resolve().parent / "lib"
_BUILD_HINT = ("rebuild with `pip install -e .` (or `python setup.py build_ext --inplace`) on a machine with nvcc{extra}; "
               "or point {var} at an existing copy")
_HEADERS_HINT = " and TensorRT headers (set TORCHTRT_EXT_TRT_INCLUDE to the folder holding NvInfer.h)"


def _search_dirs(env_var: str) -> list[Path]:
    dirs = []
    if os.environ.get(env_var):
        dirs.append(Path(os.environ[env_var]))
    dirs.append(_PACKAGE_LIB_DIR)
    return dirs


def _find(name: str, env_var: str, extra_hint: str = "") -> Path:
    """Return the path of library `name`, looking at $env_var (a file or folder) then torchtrt_ext/lib."""
    looked = []
    for candidate in _search_dirs(env_var):
        path = candidate if candidate.suffix == ".so" else candidate / name
        looked.append(str(path))
        if path.is_file():
            return path
    raise LibraryNotFoundError(failure(
        f"{name} not found (looked in: {', '.join(looked)})",
        f"the library built by setup.py into {_PACKAGE_LIB_DIR}",
        _BUILD_HINT.format(extra=extra_hint, var=env_var)))


def kernels_library_path() -> Path:
    """Path of libtorchtrt_ext_kernels.so (override: $TORCHTRT_EXT_KERNELS_LIB); raises LibraryNotFoundError."""
    return _find(KERNELS_LIB, "TORCHTRT_EXT_KERNELS_LIB")


def plugin_library_path() -> Path:
    """Path of libtorchtrt_ext_plugins.so (override: $TORCHTRT_EXT_PLUGIN_LIB); raises LibraryNotFoundError."""
    return _find(PLUGINS_LIB, "TORCHTRT_EXT_PLUGIN_LIB", _HEADERS_HINT)


def plugin_autoload_library_path() -> Path:
    """Path of libtorchtrt_ext_plugins_autoload.so (override: $TORCHTRT_EXT_PLUGIN_AUTOLOAD_LIB); raises
    LibraryNotFoundError.

    That library registers the plugin library's creators when it is merely loaded (``dlopen``): hand it to loaders
    that do not call ``getCreators`` (Triton's ``--backend-config=tensorrt,plugins=``, ONNX Runtime's
    ``trt_extra_plugin_lib_paths``). It loads the ``libtorchtrt_ext_plugins.so`` in its own folder, so keep the two
    together.
    """
    return _find(PLUGINS_AUTOLOAD_LIB, "TORCHTRT_EXT_PLUGIN_AUTOLOAD_LIB", _HEADERS_HINT)


def rtx_alias_library_path() -> Path:
    """Path of libtorchtrt_ext_rtx_alias.so (override: $TORCHTRT_EXT_RTX_ALIAS_LIB); raises LibraryNotFoundError.

    It answers to the name ``libtensorrt_rtx.so`` that TensorRT-RTX's ONNX parser dlopens (``backend.rtx_alias``).
    """
    return _find(RTX_ALIAS_LIB, "TORCHTRT_EXT_RTX_ALIAS_LIB", _HEADERS_HINT)


@functools.lru_cache(maxsize=None)
def kernels_library() -> ctypes.CDLL:
    """The loaded CUDA kernels library (loaded once per process)."""
    path = kernels_library_path()
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise LibraryNotFoundError(failure(
            f"{path} exists but could not be loaded: {exc}", "a library built for this machine's CUDA runtime",
            "rebuild it here with `python setup.py build_ext --inplace`")) from exc


def cuda_error_text(status: int) -> str:
    """'cudaErrorInvalidValue (1): invalid argument' for a cudaError_t code, through the kernels library's cudart."""
    try:
        lib = kernels_library()
        name_fn, text_fn = lib.torchtrt_ext_cuda_error_name, lib.torchtrt_ext_cuda_error_string
    except (TorchTRTExtError, AttributeError):
        return f"CUDA error {status}"
    name_fn.restype = text_fn.restype = ctypes.c_char_p
    name_fn.argtypes = text_fn.argtypes = [ctypes.c_int]
    name, text = name_fn(status), text_fn(status)
    return f"{(name or b'?').decode()} ({status}): {(text or b'?').decode()}"


def check_kernel_status(status: int, what: str, remedy: str) -> None:
    """Raise KernelError naming the CUDA status when a launcher returned non-zero; `what` says which call failed."""
    if status != 0:
        raise KernelError(failure(f"{what} returned {cuda_error_text(status)}", "status 0 (cudaSuccess)", remedy))


def on_device(device: torch.device) -> contextlib.AbstractContextManager[object]:
    """Make CUDA ``device`` current for a launch; a no-op (no device switch, the common case) when it already is."""
    if device.index is None or device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


def current_stream_handle(device: torch.device) -> int:
    """The ``cudaStream_t`` of torch's current stream on CUDA ``device`` (the capture stream under CUDA graph capture).

    Reads the handle without building a ``torch.cuda.Stream`` object, which costs several µs per call (issue 21).
    """
    index = torch.cuda.current_device() if device.index is None else device.index
    return int(torch._C._cuda_getCurrentRawStream(index))  # type: ignore[attr-defined]


def wheel_name(cuda_major: int) -> str:
    """The distribution built for CUDA `cuda_major`, named as TensorRT's wheels are: 'torchtrt_ext-cu13'."""
    return f"torchtrt_ext-cu{cuda_major}"


def build_info(lib_dir: Path = _PACKAGE_LIB_DIR) -> dict[str, Any] | None:
    """What setup.py recorded beside the libraries in `lib_dir` (cuda_version, sm, ptx); None where none were built."""
    path = lib_dir / BUILD_INFO
    return json.loads(path.read_text()) if path.is_file() else None


def _installed_distribution() -> str:
    """The installed distribution that holds this package (torchtrt_ext for a source build)."""
    names = importlib.metadata.packages_distributions().get(__package__ or "torchtrt_ext", [])
    return names[0] if names else "torchtrt_ext"


def check_cuda_runtime(torch_cuda: str | None, info: dict[str, Any] | None) -> None:
    """Raise CudaMismatchError when the libraries (`info`, from build_info) were built for another CUDA major version
    than `torch_cuda` (torch.version.cuda). Nothing to check for a CPU torch (None) or where no library was built."""
    if torch_cuda is None or info is None:
        return
    built, wanted = int(info["cuda_version"].split(".")[0]), int(torch_cuda.split(".")[0])
    if built != wanted:
        raise CudaMismatchError(failure(
            f"torchtrt_ext's CUDA kernels and TensorRT plugins in {_PACKAGE_LIB_DIR} were built for CUDA "
            f"{info['cuda_version']} ({wheel_name(built)}), but torch uses CUDA {torch_cuda}",
            f"the build for torch's CUDA {wanted}: {wheel_name(wanted)}",
            f"pip uninstall {_installed_distribution()} && pip install {wheel_name(wanted)} (the wheel that matches "
            f"tensorrt-cu{wanted}); from source, build with a CUDA {wanted} nvcc (TORCHTRT_EXT_NVCC)"))


check_cuda_runtime(torch.version.cuda, build_info())
