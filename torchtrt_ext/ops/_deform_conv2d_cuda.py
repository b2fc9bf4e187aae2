"""Eager CUDA path of ``ops.deform_conv2d``: the sampling kernel of libtorchtrt_ext_kernels.so (ctypes) + cuBLAS.

The kernel (csrc/kernels/deform_conv2d.cu) reads the input channels-last and writes the deformable column buffer
``[N, H_out*W_out, C_in*K]`` (rows ordered conv group, tap, channel) for the whole batch in one launch;
``torch.matmul`` (cuBLAS, FP32 accumulation) multiplies the matching permutation of the weight by its transpose.
Large batches are processed in slices so the column buffer stays under ``COLUMNS_BUDGET_BYTES``.

float32 with groups == 1 and a large enough GEMM uses error-compensated TF32 by default ("3xTF32"): the kernel
writes every column value as its TF32 part ``hi`` and its exact FP32 remainder ``lo``, the weight is split the same
way, and tensor cores compute ``(W_lo x hi + W_hi x lo) + sum over K-chunks of W_hi x hi`` with FP32 accumulation.
The chunks keep each tensor-core accumulation short (its rounding error grows with the reduction length) and meet
in cuBLAS's FP32 epilogue; the dropped ``W_lo x lo`` term is ~2^-20 relative. ``FP32_GEMM = "sgemm"`` (or the
environment variable ``TORCHTRT_EXT_DCN_FP32_GEMM=sgemm``) selects a plain FP32 SGEMM instead. The TF32 switch is
set around these GEMMs only and restored after (torch's flag is process-wide: not thread-safe against other threads
running float32 matmuls at the same moment).

A missing library raises :class:`~torchtrt_ext.errors.LibraryNotFoundError`, the signal for the op to fall back to
PyTorch math.
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
SPLIT_MIN_MACS = 1 << 28  # below this many multiply-adds the plain SGEMM wins (fewer launches)
TF32_CHUNK = 768  # longest reduction of one W_hi x hi tensor-core GEMM (error grows with it; 3 for K=2304)


@functools.lru_cache(maxsize=None)
def _launcher(name: str) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """The extern "C" launcher `name`, argtypes set once (raises LibraryNotFoundError without the library)."""
    fn = getattr(_native.kernels_library(), name)
    fn.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 16 + [ctypes.c_void_p]
    fn.restype = ctypes.c_int32
    return fn


def im2col_cuda(input: torch.Tensor, offset: torch.Tensor, mask: torch.Tensor | None, kernel: tuple[int, int],
                stride: tuple, padding: tuple, dilation: tuple, groups: int, offset_groups: int,
                split_tf32: bool = False) -> torch.Tensor:
    """The deformable column buffer ``[N, H_out*W_out, C_in*kh*kw]`` sampled by the CUDA kernel.

    Row ``gc*(K*Cg) + k*Cg + c'`` of a pixel holds channel ``gc*Cg + c'`` at tap ``k`` (``Cg = C_in/groups``).

    Args:
        input, offset, mask: CUDA tensors of one dtype (mask may be None), shapes as in ``ops.deform_conv2d``;
            checked by the op before this is called. ``input`` is made channels-last (free when it already is).
        kernel: (kh, kw). stride, padding, dilation: pairs. groups, offset_groups: >= 1, dividing C_in.
        split_tf32: float32 only: return ``[N, P, 2*C_in*K]``, TF32 parts then FP32 remainders. Default: False.

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
    out = torch.empty((n, ho * wo, (2 if split_tf32 else 1) * c * kh * kw), dtype=input.dtype, device=input.device)
    nhwc = input.permute(0, 2, 3, 1).contiguous()
    offset = offset.contiguous()
    mask = mask.contiguous() if mask is not None else None
    device = input.device
    context = torch.cuda.device(device) if device.index != torch.cuda.current_device() else contextlib.nullcontext()
    with context:
        stream = torch.cuda.current_stream(device).cuda_stream
        status = launcher(nhwc.data_ptr(), offset.data_ptr(), mask.data_ptr() if mask is not None else None,
                          out.data_ptr(), n, c, h, w, kh, kw, ho, wo, stride[0], stride[1], padding[0], padding[1],
                          dilation[0], dilation[1], groups, offset_groups, stream)
    if status != 0:
        _native.check_kernel_status(
            status, f"{name}(input={list(input.shape)}, offset={list(offset.shape)}, kernel={kernel}, "
            f"stride={stride}, padding={padding}, dilation={dilation}, groups={groups}, offset_groups={offset_groups})",
            "check the sizes; if the error is not cudaErrorInvalidValue, an earlier CUDA error may be pending "
            "(run with CUDA_LAUNCH_BLOCKING=1 to find it)")
    return out


def columns_weight(weight: torch.Tensor, groups: int) -> torch.Tensor:
    """The weight in the columns' row order: ``[groups, C_out/groups, K * C_in/groups]`` (tap-major per group)."""
    c_out, per_group, kh, kw = weight.shape
    w = weight.reshape(groups, c_out // groups, per_group, kh * kw).transpose(-1, -2)
    return w.reshape(groups, c_out // groups, kh * kw * per_group)


def gemm_columns(cols: torch.Tensor, w: torch.Tensor, split: bool) -> torch.Tensor:
    """``[m, C_out, P]`` = columns_weight x columns^T; ``split``: cols holds [hi | lo] (groups must be 1)."""
    m, pixels, width = cols.shape
    groups, outs, rows = w.shape
    if not split:
        if groups == 1:  # bmm (not matmul, which would fold the batch and return a transposed result)
            return torch.bmm(w[0].expand(m, -1, -1), cols.transpose(1, 2))
        per_group = cols.view(m, pixels, groups, rows).permute(0, 2, 3, 1)  # [m, groups, rows, P]
        return torch.matmul(w, per_group).reshape(m, groups * outs, pixels)
    w2 = w[0]
    w_hi = _tf32_high(w2)
    w_lo = w2 - w_hi
    with _tf32_matmul():
        pair = torch.cat([w_lo, w_hi], dim=1).expand(m, -1, -1)
        out = torch.bmm(pair, cols.transpose(1, 2))  # W_lo x hi + W_hi x lo (small terms)
        chunks = max(1, -(-rows // TF32_CHUNK))
        step = -(-rows // chunks)
        for a in range(0, rows, step):  # + W_hi x hi, in short reductions summed in FP32 epilogues
            b = min(rows, a + step)
            out.baddbmm_(w_hi[:, a:b].contiguous().expand(m, -1, -1), cols[:, :, a:b].transpose(1, 2))
    return out


def deform_conv2d_cuda(input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                       mask: torch.Tensor | None, stride: tuple, padding: tuple, dilation: tuple, groups: int,
                       offset_groups: int) -> torch.Tensor:
    """``ops.deform_conv2d`` on CUDA tensors of one dtype (float32, float16, bfloat16): kernel sampling + GEMM."""
    tensors = [t for t in (input, offset, weight, bias, mask) if t is not None]
    if input.dtype not in _LAUNCHERS or any(not t.is_cuda or t.device != input.device or t.dtype != input.dtype
                                            for t in tensors):
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
    rows = c_in * kh * kw
    split = (input.dtype == torch.float32 and groups == 1 and FP32_GEMM == "3xtf32"
             and n * c_out * ho * wo * rows >= SPLIT_MIN_MACS)
    w = columns_weight(weight, groups)
    per_image = (2 if split else 1) * rows * ho * wo * input.element_size()
    step = max(1, COLUMNS_BUDGET_BYTES // per_image)

    def convolve(n0: int, n1: int) -> torch.Tensor:  # [n1 - n0, c_out, ho, wo]
        cols = im2col_cuda(input[n0:n1], offset[n0:n1], None if mask is None else mask[n0:n1], (kh, kw), stride,
                           padding, dilation, groups, offset_groups, split_tf32=split)
        return gemm_columns(cols, w, split).view(n1 - n0, c_out, ho, wo)

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
