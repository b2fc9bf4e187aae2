"""Eager CUDA path of ``ops.deform_conv2d``: the sampling kernel of libtorchtrt_ext_kernels.so (ctypes) + cuBLAS.

The kernel (csrc/kernels/deform_conv2d.cu) writes the deformable column buffer ``[N, C_in*K, H_out*W_out]`` for
the whole batch in one launch; ``torch.matmul`` (cuBLAS, FP32 accumulation) multiplies it by the grouped weight.
Large batches are processed in slices so the column buffer stays under ``COLUMNS_BUDGET_BYTES``. A missing library
raises :class:`~torchtrt_ext.errors.LibraryNotFoundError`, the signal for the op to fall back to PyTorch math.
"""
from __future__ import annotations

import ctypes
import functools

import torch

from torchtrt_ext import _native
from torchtrt_ext.errors import InvalidInputError, failure

_LAUNCHERS = {
    torch.float32: "torchtrt_ext_deform_conv2d_im2col_f32",
    torch.float16: "torchtrt_ext_deform_conv2d_im2col_f16",
    torch.bfloat16: "torchtrt_ext_deform_conv2d_im2col_bf16",
}
COLUMNS_BUDGET_BYTES = 1 << 30  # largest column buffer allocated at once (whole images per slice, at least one)


@functools.lru_cache(maxsize=None)
def _launcher(dtype: torch.dtype) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """The extern "C" launcher for `dtype`, argtypes set once (raises LibraryNotFoundError without the library)."""
    fn = getattr(_native.kernels_library(), _LAUNCHERS[dtype])
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 15 + [ctypes.c_void_p]
    fn.restype = ctypes.c_int32
    return fn


def im2col_cuda(input: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor | None, kernel: tuple[int, int],
                stride: tuple, padding: tuple, dilation: tuple, offset_groups: int,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """The deformable column buffer ``[N, C_in*kh*kw, H_out*W_out]`` sampled by the CUDA kernel.

    Args:
        input, offset, mask: contiguous-able CUDA tensors of one dtype (mask may be None), shapes as in
            ``ops.deform_conv2d``; checked by the op before this is called.
        kernel: (kh, kw). stride, padding, dilation: pairs. offset_groups: >= 1, dividing C_in.
        out: a contiguous buffer of the result's shape and dtype to write into; None allocates one. Default: None.

    Raises:
        LibraryNotFoundError: libtorchtrt_ext_kernels.so is not built or does not load.
        KernelError: the launcher returned a CUDA error.
    """
    launcher = _launcher(input.dtype)
    n, c, h, w = input.shape
    ho, wo = offset.shape[-2:]
    kh, kw = kernel
    shape = (n, c * kh * kw, ho * wo)
    if out is None:
        out = torch.empty(shape, dtype=input.dtype, device=input.device)
    elif tuple(out.shape) != shape or out.dtype != input.dtype or not out.is_contiguous():
        raise InvalidInputError(failure(f"im2col_cuda: out is {out.dtype} {list(out.shape)}",
                                        f"a contiguous {input.dtype} tensor of shape {list(shape)}", "pass out=None"))
    input, offset = input.contiguous(), offset.contiguous()
    mask = mask.contiguous() if mask is not None else None
    with torch.cuda.device(input.device):
        stream = torch.cuda.current_stream(input.device).cuda_stream
        status = launcher(input.data_ptr(), offset.data_ptr(), mask.data_ptr() if mask is not None else None,
                          out.data_ptr(), n, c, h, w, kh, kw, ho, wo, stride[0], stride[1], padding[0], padding[1],
                          dilation[0], dilation[1], offset_groups, stream)
    _native.check_kernel_status(
        status, f"{_LAUNCHERS[input.dtype]}(input={list(input.shape)}, offset={list(offset.shape)}, kernel={kernel}, "
        f"stride={stride}, padding={padding}, dilation={dilation}, offset_groups={offset_groups})",
        "check the sizes; if the error is not cudaErrorInvalidValue, an earlier CUDA error may be pending "
        "(run with CUDA_LAUNCH_BLOCKING=1 to find it)")
    return out


def deform_conv2d_cuda(input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                       mask: torch.Tensor | None, stride: tuple, padding: tuple, dilation: tuple, groups: int,
                       offset_groups: int) -> torch.Tensor:
    """``ops.deform_conv2d`` on CUDA tensors of one dtype (float32, float16, bfloat16): kernel sampling + GEMM."""
    tensors = [t for t in (input, offset, weight, bias, mask) if t is not None]
    if any(not t.is_cuda or t.device != input.device or t.dtype != input.dtype for t in tensors) \
            or input.dtype not in _LAUNCHERS:
        raise InvalidInputError(failure(
            "deform_conv2d_cuda: got " + ", ".join(f"{t.dtype} on {t.device}" for t in tensors),
            "float32, float16 or bfloat16 tensors of one dtype on one CUDA device",
            "use torchtrt_ext.ops.deform_conv2d, which checks its inputs and falls back to PyTorch math elsewhere"))
    n, c_in = input.shape[:2]
    c_out, _, kh, kw = weight.shape
    ho, wo = offset.shape[-2:]
    if n * c_out * ho * wo == 0 or c_in == 0:
        out = torch.zeros(n, c_out, ho, wo, dtype=input.dtype, device=input.device)
        return out + bias.view(1, c_out, 1, 1) if bias is not None else out
    w = weight.reshape(groups, c_out // groups, -1)
    per_image = c_in * kh * kw * ho * wo * input.element_size()
    step = max(1, COLUMNS_BUDGET_BYTES // per_image)

    def convolve(n0: int, n1: int) -> torch.Tensor:  # [n1 - n0, c_out, ho, wo]
        cols = im2col_cuda(input[n0:n1], offset[n0:n1], None if mask is None else mask[n0:n1], (kh, kw), stride,
                           padding, dilation, offset_groups)
        return torch.matmul(w, cols.view(n1 - n0, groups, w.shape[-1], ho * wo)).view(n1 - n0, c_out, ho, wo)

    if step >= n:
        out = convolve(0, n)
    else:
        out = torch.empty(n, c_out, ho, wo, dtype=input.dtype, device=input.device)
        for n0 in range(0, n, step):
            out[n0:n0 + step] = convolve(n0, min(n, n0 + step))
    if bias is not None:
        out += bias.view(1, c_out, 1, 1)
    return out
