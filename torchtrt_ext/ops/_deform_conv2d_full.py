"""ctypes binding of the DeformConv2d full-op launchers (sampling + our own GEMM + bias, no cuBLAS).

``torchtrt_ext_deform_conv2d_{f32,f16,bf16}`` in libtorchtrt_ext_kernels.so are what the C++ TensorRT plugin calls
in ``enqueue``; the Python TensorRT plugin calls them through :func:`launch` on TensorRT's buffers, with a workspace
of :func:`workspace_size` bytes. :func:`deform_conv2d_full` runs them on torch tensors (tests, comparisons with the
eager op, which uses cuBLAS instead). Every tensor is NCHW-contiguous and of one dtype.
"""
from __future__ import annotations

import ctypes
import functools

import torch

from torchtrt_ext import _native
from torchtrt_ext.errors import InvalidInputError, failure

LAUNCHERS = {
    torch.float32: "torchtrt_ext_deform_conv2d_f32",
    torch.float16: "torchtrt_ext_deform_conv2d_f16",
    torch.bfloat16: "torchtrt_ext_deform_conv2d_bf16",
}
WORKSPACE_SIZE = "torchtrt_ext_deform_conv2d_workspace_size"


@functools.lru_cache(maxsize=None)
def _launcher(dtype: torch.dtype) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """The full-op launcher of `dtype`, argtypes set once (raises LibraryNotFoundError without the library)."""
    fn = getattr(_native.kernels_library(), LAUNCHERS[dtype])
    fn.argtypes = [ctypes.c_void_p] * 7 + [ctypes.c_int64] * 16 + [ctypes.c_void_p]
    fn.restype = ctypes.c_int32
    return fn


@functools.lru_cache(maxsize=None)
def _workspace_fn() -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    fn = getattr(_native.kernels_library(), WORKSPACE_SIZE)
    fn.argtypes = [ctypes.c_int64] * 16
    fn.restype = ctypes.c_int64
    return fn


def _sizes(input_shape: tuple, weight_shape: tuple, stride: tuple, padding: tuple, dilation: tuple, groups: int,
           offset_groups: int) -> list[int]:
    n, c, h, w = (int(d) for d in input_shape)
    c_out, _, kh, kw = (int(d) for d in weight_shape)
    return [n, c, h, w, c_out, kh, kw, int(stride[0]), int(stride[1]), int(padding[0]), int(padding[1]),
            int(dilation[0]), int(dilation[1]), int(groups), int(offset_groups)]


def workspace_size(input_shape: tuple, weight_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                   groups: int, offset_groups: int, dtype: torch.dtype) -> int:
    """Bytes of workspace the launcher of `dtype` wants for these shapes (host only; no GPU needed).

    Raises:
        InvalidInputError: the launcher would reject these sizes (the C function returned -1).
        LibraryNotFoundError: libtorchtrt_ext_kernels.so is not built or does not load.
    """
    sizes = _sizes(input_shape, weight_shape, stride, padding, dilation, groups, offset_groups)
    element = torch.empty((), dtype=dtype).element_size()
    nbytes = int(_workspace_fn()(*sizes, element))
    if nbytes < 0:
        raise InvalidInputError(failure(
            f"{WORKSPACE_SIZE}(input={list(input_shape)}, weight={list(weight_shape)}, stride={stride}, "
            f"padding={padding}, dilation={dilation}, groups={groups}, offset_groups={offset_groups}) rejects the sizes",
            "channels and output channels divisible by groups, channels by offset_groups, an output of at least 1x1",
            "check the shapes with torchtrt_ext.ops.deform_conv2d first"))
    return nbytes


def launch(dtype: torch.dtype, input: int, offset: int, weight: int, bias: int | None, mask: int | None, output: int,
           workspace: int, workspace_bytes: int, input_shape: tuple, weight_shape: tuple, stride: tuple,
           padding: tuple, dilation: tuple, groups: int, offset_groups: int, stream: int, what: str) -> None:
    """Enqueue the full op on raw device pointers (NCHW-contiguous, one dtype) on `stream`.

    Raises:
        KernelError: the launcher returned a CUDA error (`what` names the caller in the message).
    """
    sizes = _sizes(input_shape, weight_shape, stride, padding, dilation, groups, offset_groups)
    status = _launcher(dtype)(input, offset, weight, bias, mask, output, workspace, workspace_bytes, *sizes, stream)
    _native.check_kernel_status(
        status, f"{LAUNCHERS[dtype]}(input={list(input_shape)}, weight={list(weight_shape)}, stride={tuple(stride)}, "
        f"padding={tuple(padding)}, dilation={tuple(dilation)}, groups={groups}, offset_groups={offset_groups}, "
        f"workspace={workspace_bytes} bytes) in {what}",
        "check the sizes; if the error is not cudaErrorInvalidValue, an earlier CUDA error may be pending "
        "(run with CUDA_LAUNCH_BLOCKING=1 to find it)")


def deform_conv2d_full(input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                       mask: torch.Tensor | None, stride: tuple, padding: tuple, dilation: tuple, groups: int,
                       offset_groups: int, workspace_bytes: int | None = None) -> torch.Tensor:
    """``ops.deform_conv2d`` through the full-op launcher, on CUDA tensors of one dtype, on the current stream.

    Args:
        workspace_bytes: the workspace to allocate. Default: None (:func:`workspace_size` for these shapes); a
            smaller one that holds one image's columns works too (more GEMM passes).
    """
    tensors = [t for t in (input, offset, weight, bias, mask) if t is not None]
    if input.dtype not in LAUNCHERS or any(not t.is_cuda or t.device != input.device or t.dtype != input.dtype
                                            for t in tensors):
        raise InvalidInputError(failure(
            "deform_conv2d_full: got " + ", ".join(f"{t.dtype} on {t.device}" for t in tensors),
            "float32, float16 or bfloat16 tensors of one dtype on one CUDA device", "cast and move them first"))
    input, offset, weight = input.contiguous(), offset.contiguous(), weight.contiguous()
    bias = bias.contiguous() if bias is not None else None
    mask = mask.contiguous() if mask is not None else None
    if workspace_bytes is None:
        workspace_bytes = workspace_size(tuple(input.shape), tuple(weight.shape), stride, padding, dilation, groups,
                                         offset_groups, input.dtype)
    workspace = torch.empty(max(1, workspace_bytes), dtype=torch.uint8, device=input.device)
    n, c_out = input.shape[0], weight.shape[0]
    ho, wo = offset.shape[-2:]
    out = torch.empty(n, c_out, ho, wo, dtype=input.dtype, device=input.device)
    with torch.cuda.device(input.device):
        stream = torch.cuda.current_stream(input.device).cuda_stream
        launch(input.dtype, input.data_ptr(), offset.data_ptr(), weight.data_ptr(),
               None if bias is None else bias.data_ptr(), None if mask is None else mask.data_ptr(), out.data_ptr(),
               workspace.data_ptr(), workspace_bytes, tuple(input.shape), tuple(weight.shape), stride, padding,
               dilation, groups, offset_groups, stream, "deform_conv2d_full")
    return out
