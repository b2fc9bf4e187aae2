"""Eager CUDA path of ``ops.l2norm`` and its raw-buffer launcher: the L2Norm kernel of libtorchtrt_ext_kernels.so
through ctypes.

The same kernel (csrc/kernels/l2norm.cu) serves the TensorRT plugins: :func:`launch_l2norm` is the op's
``OpSpec.launch``, called by the Python plugin on TensorRT's buffers and by :func:`l2norm_cuda` on torch tensors. The tensor is seen as
``[outer, reduced, inner]`` around the normalized axis and the launcher runs on the current torch stream of the
input's device. A missing library raises :class:`~torchtrt_ext.errors.LibraryNotFoundError`, the signal for the
op to fall back to PyTorch math.
"""
from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Sequence

import torch

from torchtrt_ext import _native
from torchtrt_ext.errors import InvalidInputError, failure
from torchtrt_ext.ops.spec import Buffer

_LAUNCHERS = {
    torch.float32: "torchtrt_ext_l2norm_f32",
    torch.float16: "torchtrt_ext_l2norm_f16",
    torch.bfloat16: "torchtrt_ext_l2norm_bf16",
}


@functools.lru_cache(maxsize=None)
def _launcher(dtype: torch.dtype) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """The extern "C" launcher for `dtype`, argtypes set once (raises LibraryNotFoundError without the library)."""
    fn = getattr(_native.kernels_library(), _LAUNCHERS[dtype])
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                   ctypes.c_float, ctypes.c_void_p]
    fn.restype = ctypes.c_int32
    return fn


def view_sizes(shape: torch.Size | tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """(outer, reduced, inner) of a contiguous tensor of `shape` normalized over `axis` (0 <= axis < rank)."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def launch_l2norm(inputs: Sequence[Buffer | None], outputs: Sequence[Buffer], stream: int, *, axis: int,
                  eps: float) -> None:
    """The L2Norm kernel on contiguous buffers ``x -> y`` normalized over ``axis`` (0 <= axis < rank) on ``stream``.

    Raises:
        LibraryNotFoundError: libtorchtrt_ext_kernels.so is not built or does not load.
        KernelError: the launcher returned a CUDA error.
    """
    x, y = inputs[0], outputs[0]
    assert x is not None  # x is not optional
    _enqueue(x.ptr, y.ptr, x.shape, x.dtype, axis, eps, stream)


def _enqueue(x: int, y: int, shape: torch.Size | tuple[int, ...], dtype: torch.dtype, axis: int, eps: float,
             stream: int) -> None:
    """Enqueue the kernel on device pointers ``x -> y`` (contiguous, ``shape``, ``dtype``); see launch_l2norm."""
    if math.prod(shape) == 0:
        return
    outer, reduced, inner = view_sizes(shape, axis)
    status = _launcher(dtype)(x, y, outer, reduced, inner, float(eps), stream)
    if status != 0:  # the message is built only on failure: formatting it costs as much as the launch
        _native.check_kernel_status(
            status, f"{_LAUNCHERS[dtype]}(outer={outer}, reduced={reduced}, inner={inner}, eps={eps})",
            "check the sizes; if the error is not cudaErrorInvalidValue, an earlier CUDA error may be pending "
            "(run with CUDA_LAUNCH_BLOCKING=1 to find it)")


def l2norm_cuda(x: torch.Tensor, axis: int, eps: float, out: torch.Tensor | None = None) -> torch.Tensor:
    """``x / max(||x||_2 over axis, eps)`` computed by the CUDA kernel.

    Args:
        x: floating tensor (float32, float16 or bfloat16) on a CUDA device. A non-contiguous ``x`` is copied to a
            contiguous one first (one extra read and write of the tensor).
        axis: the normalized axis, already in ``0..x.dim()-1``.
        eps: lower bound of the norm.
        out: contiguous tensor of x's shape, dtype and device to write into; None allocates one. Default: None.

    Returns:
        ``out`` (or a new tensor like ``x``) holding the result; contiguous.

    Raises:
        InvalidInputError: x is not a CUDA tensor of a supported dtype, axis is out of range, or out does not fit.
        LibraryNotFoundError: libtorchtrt_ext_kernels.so is not built or does not load.
        KernelError: the launcher returned a CUDA error.
    """
    if not x.is_cuda or x.dtype not in _LAUNCHERS:
        raise InvalidInputError(failure(
            f"l2norm_cuda: got a {x.dtype} tensor on {x.device}", "a float32, float16 or bfloat16 CUDA tensor",
            "use torchtrt_ext.ops.l2norm, which falls back to PyTorch math elsewhere"))
    if not 0 <= axis < x.dim():
        raise InvalidInputError(failure(
            f"l2norm_cuda: axis={axis} for a rank-{x.dim()} tensor", f"an axis in 0..{x.dim() - 1}",
            "normalize a negative axis with axis % x.dim() first"))
    _launcher(x.dtype)  # LibraryNotFoundError before any allocation
    if out is not None and (out.shape != x.shape or out.dtype != x.dtype or out.device != x.device
                            or not out.is_contiguous()):
        raise InvalidInputError(failure(
            f"l2norm_cuda: out is {out.dtype} {list(out.shape)} on {out.device} (contiguous={out.is_contiguous()})",
            f"a contiguous {x.dtype} tensor of shape {list(x.shape)} on {x.device}", "pass out=None"))
    return l2norm_cuda_unchecked(x, axis, eps, out)


def l2norm_cuda_unchecked(x: torch.Tensor, axis: int, eps: float, out: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`l2norm_cuda` without its checks, for a caller that made them: the op (``OpSpec.cuda``), whose checks
    (a float CUDA tensor, ``0 <= axis < rank``) ran once for the call's signature. Raises LibraryNotFoundError and
    KernelError as l2norm_cuda does."""
    x = x.contiguous()
    if out is None:
        out = torch.empty_like(x, memory_format=torch.contiguous_format)
    if x.numel() == 0:
        return out
    with _native.on_device(x.device):
        _enqueue(x.data_ptr(), out.data_ptr(), x.shape, x.dtype, axis, eps, _native.current_stream_handle(x.device))
    return out
