"""Eager CUDA path of ``ops.efficient_nms``: the EfficientNMS launchers of libtorchtrt_ext_kernels.so through ctypes.

The same kernels (csrc/kernels/efficient_nms.cu) serve the C++ TensorRT plugin. The launch runs on the current torch
stream of the inputs' device, with its workspace from torch's caching allocator. A missing library raises
:class:`~torchtrt_ext.errors.LibraryNotFoundError`, the signal for the op to fall back to PyTorch math.
"""
from __future__ import annotations

import ctypes
import functools

import torch

from torchtrt_ext import _native
from torchtrt_ext.errors import InvalidInputError, failure

LAUNCHERS = {
    torch.float32: "torchtrt_ext_efficient_nms_f32",
    torch.float16: "torchtrt_ext_efficient_nms_f16",
    torch.bfloat16: "torchtrt_ext_efficient_nms_bf16",
}
WORKSPACE_SIZE = "torchtrt_ext_efficient_nms_workspace_size"


class Params(ctypes.Structure):
    """Mirror of ``TorchtrtExtEfficientNmsParams`` (csrc/kernels/efficient_nms.h)."""

    _fields_ = [("batch", ctypes.c_int64), ("anchors", ctypes.c_int64), ("classes", ctypes.c_int64),
                ("max_output_boxes", ctypes.c_int32), ("background_class", ctypes.c_int32),
                ("score_activation", ctypes.c_int32), ("class_agnostic", ctypes.c_int32),
                ("box_coding", ctypes.c_int32), ("score_threshold", ctypes.c_float), ("iou_threshold", ctypes.c_float)]


@functools.lru_cache(maxsize=None)
def _launcher(dtype: torch.dtype) -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    fn = getattr(_native.kernels_library(), LAUNCHERS[dtype])
    fn.argtypes = [ctypes.POINTER(Params)] + [ctypes.c_void_p] * 7 + [ctypes.c_int64, ctypes.c_void_p]
    fn.restype = ctypes.c_int32
    return fn


@functools.lru_cache(maxsize=None)
def _workspace_fn() -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    fn = getattr(_native.kernels_library(), WORKSPACE_SIZE)
    fn.argtypes = [ctypes.POINTER(Params)]
    fn.restype = ctypes.c_int64
    return fn


def make_params(batch: int, anchors: int, classes: int, **attrs: float) -> Params:
    """The launcher's parameter struct for these sizes and the op's attributes (its ONNX field names)."""
    return Params(batch=batch, anchors=anchors, classes=classes, **attrs)


def workspace_size(params: Params) -> int:
    """Bytes of workspace the launchers want for ``params`` (host only; no GPU needed).

    Raises:
        InvalidInputError: the launcher rejects the params (the C function returned -1).
        LibraryNotFoundError: libtorchtrt_ext_kernels.so is not built or does not load.
    """
    nbytes = int(_workspace_fn()(ctypes.byref(params)))
    if nbytes < 0:
        raise InvalidInputError(failure(
            f"{WORKSPACE_SIZE} rejects batch={params.batch}, anchors={params.anchors}, classes={params.classes}, "
            f"max_output_boxes={params.max_output_boxes}", "sizes >= 0 with batch * anchors * classes < 2**31, "
            "max_output_boxes >= 1 and thresholds in [0, 1]", "check the inputs with torchtrt_ext.ops.efficient_nms"))
    return nbytes


def efficient_nms_cuda(boxes: torch.Tensor, scores: torch.Tensor, **attrs: float) -> tuple[torch.Tensor, ...]:
    """The op on CUDA tensors (``boxes [B, A, 4]``, ``scores [B, A, C]``, one dtype) by the CUDA kernels.

    ``attrs`` are the op's validated attributes. Returns the four fixed-size outputs.

    Raises:
        InvalidInputError: the inputs are not CUDA tensors of one supported dtype, or the launcher rejects the sizes.
        LibraryNotFoundError: libtorchtrt_ext_kernels.so is not built or does not load.
        KernelError: the launcher returned a CUDA error.
    """
    if not (boxes.is_cuda and scores.is_cuda) or boxes.dtype not in LAUNCHERS or scores.dtype != boxes.dtype:
        raise InvalidInputError(failure(
            f"efficient_nms_cuda: got {boxes.dtype} boxes on {boxes.device}, {scores.dtype} scores on {scores.device}",
            "CUDA tensors of one dtype: float32, float16 or bfloat16",
            "use torchtrt_ext.ops.efficient_nms, which checks its inputs and falls back to PyTorch math elsewhere"))
    launcher = _launcher(boxes.dtype)
    batch, anchors, classes = scores.shape
    params = make_params(batch, anchors, classes, **attrs)
    nbytes = workspace_size(params)
    k, device = params.max_output_boxes, boxes.device
    boxes, scores = boxes.contiguous(), scores.contiguous()
    num = torch.empty(batch, 1, dtype=torch.int32, device=device)
    out_boxes = torch.empty(batch, k, 4, dtype=boxes.dtype, device=device)
    out_scores = torch.empty(batch, k, dtype=boxes.dtype, device=device)
    out_classes = torch.empty(batch, k, dtype=torch.int32, device=device)
    workspace = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=device)
    with _native.on_device(device):
        stream = torch.cuda.current_stream(device).cuda_stream
        status = launcher(ctypes.byref(params), boxes.data_ptr(), scores.data_ptr(), num.data_ptr(),
                          out_boxes.data_ptr(), out_scores.data_ptr(), out_classes.data_ptr(), workspace.data_ptr(),
                          nbytes, stream)
    _native.check_kernel_status(
        status, f"{LAUNCHERS[boxes.dtype]}(batch={batch}, anchors={anchors}, classes={classes}, max_output_boxes={k})",
        "check the sizes; if the error is not cudaErrorInvalidValue, an earlier CUDA error may be pending "
        "(run with CUDA_LAUNCH_BLOCKING=1 to find it)")
    return num, out_boxes, out_scores, out_classes
