"""Eager CUDA path of ``ops.deform_conv2d``: the sampling kernel of libtorchtrt_ext_kernels.so (ctypes) + cuBLAS.

The kernel (csrc/kernels/deform_conv2d.cu) writes the deformable column buffer ``[N, C_in*K, H_out*W_out]`` for
the whole batch in one launch; ``torch.matmul`` (cuBLAS, FP32 accumulation) multiplies it by the grouped weight.

float32 with groups == 1 uses error-compensated TF32 by default ("3xTF32"): the kernel writes every column value
as its TF32 part and its exact FP32 remainder, the weight is split the same way, and tensor cores compute
``W_hi x (C_hi + C_lo) + W_lo x C_hi`` with FP32 accumulation, whose error is close to an FP32 GEMM's (the dropped
``W_lo x C_lo`` term is ~2^-22 relative) at a fraction of its time. ``FP32_GEMM = "sgemm"`` (or the environment
variable ``TORCHTRT_EXT_DCN_FP32_GEMM=sgemm``) selects a plain FP32 SGEMM instead. The TF32 switch is set around
the two GEMMs only and restored after (torch's flag is process-wide: not thread-safe against other threads that
run float32 matmuls at the same moment).
Large batches are processed in slices so the column buffer stays under ``COLUMNS_BUDGET_BYTES``. A missing library
raises :class:`~torchtrt_ext.errors.LibraryNotFoundError`, the signal for the op to fall back to PyTorch math.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator

import torch

from torchtrt_ext import _native
from torchtrt_ext.errors import InvalidInputError, failure

_LAUNCHERS = {
    torch.float32: "torchtrt_ext_deform_conv2d_im2col_f32",
    torch.float16: "torchtrt_ext_deform_conv2d_im2col_f16",
    torch.bfloat16: "torchtrt_ext_deform_conv2d_im2col_bf16",
}
_SPLIT_LAUNCHER = "torchtrt_ext_deform_conv2d_im2col_split_tf32"
COLUMNS_BUDGET_BYTES = 1 << 30  # largest column buffer allocated at once (whole images per slice, at least one)
FP32_GEMM = os.environ.get("TORCHTRT_EXT_DCN_FP32_GEMM", "3xtf32")  # "3xtf32" or "sgemm"


@functools.lru_cache(maxsize=None)
def _launcher(name: str) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """The extern "C" launcher `name`, argtypes set once (raises LibraryNotFoundError without the library)."""
    fn = getattr(_native.kernels_library(), name)
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 15 + [ctypes.c_void_p]
    fn.restype = ctypes.c_int32
    return fn


def im2col_cuda(input: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor | None, kernel: tuple[int, int],
                stride: tuple, padding: tuple, dilation: tuple, offset_groups: int,
                out: torch.Tensor | None = None, split_tf32: bool = False) -> torch.Tensor:
    """The deformable column buffer ``[N, C_in*kh*kw, H_out*W_out]`` sampled by the CUDA kernel.

    Args:
        input, offset, mask: contiguous-able CUDA tensors of one dtype (mask may be None), shapes as in
            ``ops.deform_conv2d``; checked by the op before this is called.
        kernel: (kh, kw). stride, padding, dilation: pairs. offset_groups: >= 1, dividing C_in.
        out: a contiguous buffer of the result's shape and dtype to write into; None allocates one. Default: None.
        split_tf32: float32 only: return ``[N, 2*C_in*K, P]``, TF32 parts then FP32 remainders. Default: False.

    Raises:
        LibraryNotFoundError: libtorchtrt_ext_kernels.so is not built or does not load.
        KernelError: the launcher returned a CUDA error.
    """
    name = _SPLIT_LAUNCHER if split_tf32 else _LAUNCHERS[input.dtype]
    if split_tf32 and input.dtype != torch.float32:
        raise InvalidInputError(failure(f"im2col_cuda: split_tf32 with {input.dtype}", "float32", "split_tf32=False"))
    launcher = _launcher(name)
    n, c, h, w = input.shape
    ho, wo = offset.shape[-2:]
    kh, kw = kernel
    shape = (n, (2 if split_tf32 else 1) * c * kh * kw, ho * wo)
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
        status, f"{name}(input={list(input.shape)}, offset={list(offset.shape)}, kernel={kernel}, "
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
    split = input.dtype == torch.float32 and groups == 1 and FP32_GEMM == "3xtf32"
    w = weight.reshape(groups, c_out // groups, -1)
    rows = c_in * kh * kw
    per_image = (2 if split else 1) * rows * ho * wo * input.element_size()
    step = max(1, COLUMNS_BUDGET_BYTES // per_image)
    if split:
        w_hi = _tf32_high(w[0])
        w_pair = torch.cat([w_hi, w_hi], dim=1)  # [c_out, 2 * rows]: multiplies [hi; lo]
        w_lo = w[0] - w_hi

    def convolve(n0: int, n1: int) -> torch.Tensor:  # [n1 - n0, c_out, ho, wo]
        m = n1 - n0
        cols = im2col_cuda(input[n0:n1], offset[n0:n1], None if mask is None else mask[n0:n1], (kh, kw), stride,
                           padding, dilation, offset_groups, split_tf32=split)
        if not split:
            return torch.matmul(w, cols.view(m, groups, rows // groups, ho * wo)).view(m, c_out, ho, wo)
        with _tf32_matmul():
            res = torch.matmul(w_pair, cols)  # W_hi x (C_hi + C_lo)
            res.baddbmm_(w_lo.expand(m, -1, -1), cols[:, :rows])  # + W_lo x C_hi
        return res.view(m, c_out, ho, wo)

    if step >= n:
        out = convolve(0, n)
    else:
        out = torch.empty(n, c_out, ho, wo, dtype=input.dtype, device=input.device)
        for n0 in range(0, n, step):
            out[n0:n0 + step] = convolve(n0, min(n, n0 + step))
    if bias is not None:
        out += bias.view(1, c_out, 1, 1)
    return out


def _tf32_high(x: torch.Tensor) -> torch.Tensor:
    """x with the low 13 mantissa bits cleared: exactly representable in TF32 (the kernel's split, in torch)."""
    return (x.contiguous().view(torch.int32) & -8192).view(torch.float32)


@contextlib.contextmanager
def _tf32_matmul() -> Iterator[None]:
    """TF32 tensor cores for float32 matmuls inside the block; the previous setting is restored after."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # torch >= 2.9: the new API (mixing it with allow_tf32 raises)
        previous = matmul.fp32_precision
        matmul.fp32_precision = "tf32"
        try:
            yield
        finally:
            matmul.fp32_precision = previous
    else:
        previous = matmul.allow_tf32
        matmul.allow_tf32 = True
        try:
            yield
        finally:
            matmul.allow_tf32 = previous
