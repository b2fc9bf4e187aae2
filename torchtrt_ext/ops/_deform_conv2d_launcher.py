"""ctypes binding of the DeformConv2d launcher (sampling + tensor-core GEMM + bias), used by every path that runs it.

The GEMM is cuBLASLt's where ``libcublasLt`` loads (torch's CUDA wheels bring it), else our own kernel; the first
launch logs which (:func:`gemm_library`), a warning when it fell back.

``torchtrt_ext_deform_conv2d`` in libtorchtrt_ext_kernels.so is what the C++ TensorRT plugin calls in ``enqueue``;
the Python TensorRT plugin calls it through :func:`launch` on TensorRT's buffers, and the eager op on CUDA tensors
through :func:`deform_conv2d_full`, with a workspace of :func:`workspace_size` bytes from torch's allocator. So the
eager op, both plugins and the benchmark run one implementation. The launcher's sizes travel in one struct,
:class:`Desc`, the mirror of ``TorchtrtExtDeformConv2dDesc`` (csrc/kernels/deform_conv2d.h).
"""
from __future__ import annotations

import ctypes
import functools
import logging

import torch

from torchtrt_ext import _native
from torchtrt_ext.errors import InvalidInputError, failure

log = logging.getLogger(__name__)
LAUNCHER = "torchtrt_ext_deform_conv2d"
GEMM_LIBRARY = "torchtrt_ext_gemm_library"
WORKSPACE_SIZE = "torchtrt_ext_deform_conv2d_workspace_size"
DTYPES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}  # TORCHTRT_EXT_DCN_FLOAT32 / _FLOAT16 / _BFLOAT16
NCHW, CHANNELS_LAST = 0, 1  # TORCHTRT_EXT_DCN_NCHW / _CHANNELS_LAST
_SIZES = ("n", "channels", "height", "width", "out_channels", "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_h",
          "pad_w", "dil_h", "dil_w", "groups", "offset_groups")


class Desc(ctypes.Structure):
    """``TorchtrtExtDeformConv2dDesc``: the sizes, data type and input layout of one call."""

    _fields_ = [(name, ctypes.c_int64) for name in _SIZES] + [("dtype", ctypes.c_int32), ("input_layout", ctypes.c_int32)]


class Tensors(ctypes.Structure):
    """``TorchtrtExtDeformConv2dTensors``: the device pointers of one call (bias and mask may be None)."""

    _fields_ = [(name, ctypes.c_void_p) for name in ("input", "offset", "weight", "bias", "mask", "output")]


@functools.lru_cache(maxsize=None)
def _functions() -> tuple[ctypes._CFuncPtr, ctypes._CFuncPtr]:  # type: ignore[name-defined]
    """(launcher, workspace size) with their argtypes set once (raises LibraryNotFoundError without the library)."""
    library = _native.kernels_library()
    launcher = getattr(library, LAUNCHER)
    launcher.argtypes = [ctypes.POINTER(Desc), ctypes.POINTER(Tensors), ctypes.c_void_p, ctypes.c_int64,
                         ctypes.c_void_p]
    launcher.restype = ctypes.c_int32
    size = getattr(library, WORKSPACE_SIZE)
    size.argtypes = [ctypes.POINTER(Desc)]
    size.restype = ctypes.c_int64
    return launcher, size


def gemm_library() -> str:
    """Which GEMM the launcher runs: "cuBLASLt <version> (<file>)", or our own kernel and why cuBLASLt is not used."""
    function = getattr(_native.kernels_library(), GEMM_LIBRARY)
    function.argtypes = []
    function.restype = ctypes.c_char_p
    return str(function().decode())


@functools.lru_cache(maxsize=None)
def _log_gemm_library() -> None:
    """Say once per process which GEMM DeformConv2d runs; a warning when it fell back from cuBLASLt."""
    line = gemm_library()
    log.log(logging.INFO if line.startswith("cuBLASLt") else logging.WARNING, "DeformConv2d GEMM: %s", line)


def describe(input_shape: tuple[int, ...], weight_shape: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...], groups: int,
             offset_groups: int, dtype: torch.dtype, channels_last: bool = False) -> Desc:
    """The launcher's descriptor of these shapes (``input_shape`` is N, C, H, W whatever the memory layout)."""
    n, c, h, w = (int(d) for d in input_shape)
    c_out, _, kh, kw = (int(d) for d in weight_shape)
    return Desc(n, c, h, w, c_out, kh, kw, int(stride[0]), int(stride[1]), int(padding[0]), int(padding[1]),
                int(dilation[0]), int(dilation[1]), int(groups), int(offset_groups), DTYPES[dtype],
                CHANNELS_LAST if channels_last else NCHW)


def _text(desc: Desc) -> str:
    return ", ".join(f"{name}={getattr(desc, name)}" for name in _SIZES) + f", dtype={desc.dtype}, " \
        f"input_layout={desc.input_layout}"


def desc_workspace_size(desc: Desc) -> int:
    """Bytes of workspace the launcher wants for ``desc`` (host only; no GPU needed).

    Raises:
        InvalidInputError: the launcher would reject the descriptor (the C function returned -1).
        LibraryNotFoundError: libtorchtrt_ext_kernels.so is not built or does not load.
    """
    nbytes = int(_functions()[1](ctypes.byref(desc)))
    if nbytes < 0:
        raise InvalidInputError(failure(
            f"{WORKSPACE_SIZE}({_text(desc)}) rejects the sizes",
            "channels and output channels divisible by groups, channels by offset_groups, an output of at least 1x1",
            "check the shapes with torchtrt_ext.ops.deform_conv2d first"))
    return nbytes


@functools.lru_cache(maxsize=256)
def _plan(input_shape: tuple[int, ...], weight_shape: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...], groups: int,
          offset_groups: int, dtype: torch.dtype, channels_last: bool) -> tuple[Desc, int]:
    """(descriptor, workspace bytes) of one call signature, built once: the eager op's hot path reads them from here.
    The descriptor is shared: never modify it."""
    desc = describe(input_shape, weight_shape, stride, padding, dilation, groups, offset_groups, dtype, channels_last)
    return desc, desc_workspace_size(desc)


def workspace_size(input_shape: tuple[int, ...], weight_shape: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...],
                   groups: int, offset_groups: int, dtype: torch.dtype, channels_last: bool = False) -> int:
    """Bytes of workspace the launcher wants for these shapes (see :func:`desc_workspace_size`)."""
    return desc_workspace_size(describe(input_shape, weight_shape, stride, padding, dilation, groups, offset_groups,
                                        dtype, channels_last))


def launch_desc(desc: Desc, tensors: Tensors, workspace: int, workspace_bytes: int, stream: int, what: str) -> None:
    """Enqueue the op described by ``desc`` on raw device pointers on ``stream``.

    Raises:
        KernelError: the launcher returned a CUDA error (`what` names the caller in the message).
    """
    _log_gemm_library()
    status = _functions()[0](ctypes.byref(desc), ctypes.byref(tensors), workspace, workspace_bytes, stream)
    if status != 0:
        _native.check_kernel_status(
            status, f"{LAUNCHER}({_text(desc)}, workspace={workspace_bytes} bytes) in {what}",
            "check the sizes; if the error is not cudaErrorInvalidValue, an earlier CUDA error may be pending "
            "(run with CUDA_LAUNCH_BLOCKING=1 to find it)")


def launch(dtype: torch.dtype, input: int, offset: int, weight: int, bias: int | None, mask: int | None, output: int,
           workspace: int, workspace_bytes: int, input_shape: tuple[int, ...], weight_shape: tuple[int, ...], stride: tuple[int, ...],
           padding: tuple[int, ...], dilation: tuple[int, ...], groups: int, offset_groups: int, stream: int, what: str) -> None:
    """Enqueue the op on raw device pointers (NCHW-contiguous, one dtype) on `stream` (see :func:`launch_desc`)."""
    desc = describe(input_shape, weight_shape, stride, padding, dilation, groups, offset_groups, dtype)
    launch_desc(desc, Tensors(input, offset, weight, bias, mask, output), workspace, workspace_bytes, stream, what)


def deform_conv2d_full(input: torch.Tensor, offset: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                       mask: torch.Tensor | None, stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...], groups: int,
                       offset_groups: int, workspace_bytes: int | None = None) -> torch.Tensor:
    """``ops.deform_conv2d`` on CUDA tensors of one dtype (float32, float16, bfloat16) through the launcher.

    ``input`` is read as it is when it is contiguous or channels-last (else made contiguous); the output is
    contiguous NCHW. The workspace comes from torch's caching allocator on the current stream.

    Args:
        input, offset, weight, bias, mask, stride, padding, dilation, groups, offset_groups: as in
            ``ops.deform_conv2d`` (bias and mask may be None).
        workspace_bytes: the workspace to allocate. Default: None (:func:`workspace_size` for these shapes); a
            smaller one that holds one image's columns works too (more passes).
    """
    tensors = [t for t in (input, offset, weight, bias, mask) if t is not None]
    if input.dtype not in DTYPES or any(not t.is_cuda or t.device != input.device or t.dtype != input.dtype
                                        for t in tensors):
        raise InvalidInputError(failure(
            "deform_conv2d_full: got " + ", ".join(f"{t.dtype} on {t.device}" for t in tensors),
            "float32, float16 or bfloat16 tensors of one dtype on one CUDA device", "cast and move them first"))
    channels_last = not input.is_contiguous() and input.is_contiguous(memory_format=torch.channels_last)
    if not channels_last:
        input = input.contiguous()
    offset, weight = offset.contiguous(), weight.contiguous()
    bias = bias.contiguous() if bias is not None else None
    mask = mask.contiguous() if mask is not None else None
    desc, needed = _plan(input.shape, weight.shape, tuple(stride), tuple(padding), tuple(dilation), groups,
                         offset_groups, input.dtype, channels_last)
    if workspace_bytes is None:
        workspace_bytes = needed
    n, c_out = input.shape[0], weight.shape[0]
    ho, wo = offset.shape[-2:]
    out = torch.empty(n, c_out, ho, wo, dtype=input.dtype, device=input.device)
    with _native.on_device(input.device):
        workspace = torch.empty(max(1, workspace_bytes), dtype=torch.uint8, device=input.device)
        stream = _native.current_stream_handle(input.device)
        pointers = Tensors(input.data_ptr(), offset.data_ptr(), weight.data_ptr(),
                           None if bias is None else bias.data_ptr(), None if mask is None else mask.data_ptr(),
                           out.data_ptr())
        launch_desc(desc, pointers, workspace.data_ptr(), workspace_bytes, stream, "deform_conv2d_full")
    return out
