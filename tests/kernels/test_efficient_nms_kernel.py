"""The EfficientNMS CUDA kernels (csrc/kernels/efficient_nms.cu), which the eager CUDA path and the C++ plugin call.

CPU (the kernels library only): the workspace size (host arithmetic, no GPU: the plugin asks for it while building),
growing with batch, anchors, classes and K, -1 for bad params; launches rejected before touching the GPU.
GPU (marker gpu): the kernels against the eager op on the CPU (which the op tests hold to a plain-Python NMS): boxes,
classes and counts equal, scores within 1e-6 (a sigmoid may differ by an ulp); many overlapping boxes, several
classes, class-agnostic on and off, both box codings, raw scores, background class, fp16/bf16, B > 1, images
without detections, candidates spanning many chunks, a YOLO-sized case (8400 anchors, 80 classes); on a side stream.
And against tests/ops/nms_reference.py (plain Python, no code shared with the op) on the boundary cases: scores and
IoUs exactly on the thresholds, background class 0, one image saturating K, equal scores, so that a mistake shared by
the eager op and the kernels still shows.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pytest
import torch

from tests.ops.nms_reference import boundary_cases, overlapping_boxes, reference_nms
from torchtrt_ext.errors import InvalidInputError, LibraryNotFoundError
from torchtrt_ext.ops import _efficient_nms_cuda as nms_cuda
from torchtrt_ext.ops.efficient_nms import SPEC

CUDA_ERROR_INVALID_VALUE = 1
DEFAULTS = {a.name: a.default for a in SPEC.attrs}


@pytest.fixture(scope="module", autouse=True)
def kernels_library() -> None:
    try:
        nms_cuda._workspace_fn()
    except LibraryNotFoundError as exc:
        pytest.skip(f"kernels library not built or not loadable: {exc}")


def params(batch: int = 2, anchors: int = 100, classes: int = 3, **fields: float) -> nms_cuda.Params:
    return nms_cuda.make_params(batch, anchors, classes, **{**DEFAULTS, **fields})


def test_workspace_size_grows_with_every_size() -> None:
    base = nms_cuda.workspace_size(params())
    assert base > 0 and base % 256 == 0
    for grown in (params(batch=3), params(anchors=101 * 8), params(classes=40), params(max_output_boxes=1000)):
        assert nms_cuda.workspace_size(grown) > base
    assert nms_cuda.workspace_size(params(batch=0)) > 0  # counters and cub's reserve only


@pytest.mark.parametrize("fields,match", [({"max_output_boxes": 0}, "max_output_boxes >= 1"),
                                         ({"iou_threshold": 1.5}, "thresholds in \\[0, 1\\]"),
                                         ({"anchors": 1 << 20, "classes": 1 << 12}, "< 2\\*\\*31")])
def test_workspace_size_rejects_bad_params(fields: dict, match: str) -> None:
    sizes = {k: fields.pop(k) for k in ("anchors", "classes") if k in fields}
    with pytest.raises(InvalidInputError, match=match):
        nms_cuda.workspace_size(params(**sizes, **fields))


@pytest.mark.parametrize("dtype", list(nms_cuda.LAUNCHERS))
def test_launcher_rejects_bad_arguments_before_touching_the_gpu(dtype: torch.dtype) -> None:
    launch = nms_cuda._launcher(dtype)
    buffers = [ctypes.c_void_p(16)] * 6
    good = params()
    assert launch(None, *buffers, ctypes.c_void_p(16), 1 << 20, None) == CUDA_ERROR_INVALID_VALUE
    bad = params(box_coding=2)
    assert launch(ctypes.byref(bad), *buffers, ctypes.c_void_p(16), 1 << 20, None) == CUDA_ERROR_INVALID_VALUE
    assert launch(ctypes.byref(good), None, None, None, None, None, None, None, 0, None) == CUDA_ERROR_INVALID_VALUE


def case(seed: int, batch: int, anchors: int, classes: int, box_coding: int = 0, raw: bool = False,
         dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    boxes = torch.from_numpy(overlapping_boxes(rng, batch, anchors, clusters=12, box_coding=box_coding))
    scores = rng.normal(-1.5, 1.5, (batch, anchors, classes)) if raw else rng.uniform(0, 1, (batch, anchors, classes)) ** 3
    return boxes.to(dtype), torch.from_numpy(scores.astype(np.float32)).to(dtype)


def assert_same_detections(got: tuple, expected: tuple) -> None:
    num, boxes, scores, classes = (t.cpu() for t in got)
    torch.testing.assert_close(num, expected[0], rtol=0, atol=0)
    torch.testing.assert_close(classes, expected[3], rtol=0, atol=0)
    torch.testing.assert_close(boxes, expected[1], rtol=0, atol=0)
    torch.testing.assert_close(scores.float(), expected[2].float(), rtol=1e-6, atol=1e-6)


GPU_CASES = {
    # name: (batch, anchors, classes, fields)
    "per_class": (3, 300, 4, {"score_threshold": 0.2, "iou_threshold": 0.5, "max_output_boxes": 50}),
    "class_agnostic": (3, 300, 4, {"score_threshold": 0.2, "iou_threshold": 0.5, "class_agnostic": 1}),
    "cxcywh": (2, 300, 5, {"box_coding": 1, "max_output_boxes": 30}),
    "raw_scores_sigmoid": (2, 300, 5, {"score_activation": 1, "score_threshold": 0.3}),
    "background_class": (2, 200, 3, {"background_class": 0, "score_threshold": 0.1}),
    "many_chunks_k_large": (2, 2000, 2, {"score_threshold": 0.05, "iou_threshold": 0.7, "max_output_boxes": 1500}),
    "k_one": (4, 100, 3, {"max_output_boxes": 1}),
    "yolo_8400x80": (2, 8400, 80, {"score_threshold": 0.25, "iou_threshold": 0.45, "max_output_boxes": 100}),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_CASES))
@pytest.mark.parametrize("dtype", list(nms_cuda.LAUNCHERS))
def test_kernels_match_the_eager_op(name: str, dtype: torch.dtype) -> None:
    batch, anchors, classes, fields = GPU_CASES[name]
    attrs = {**DEFAULTS, **fields}
    boxes, scores = case(len(name), batch, anchors, classes, attrs["box_coding"], bool(attrs["score_activation"]),
                         dtype)
    if name == "per_class":
        scores[1] = 0  # an image without detections
    expected = SPEC.eager(boxes, scores, **attrs)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the launch goes on the current stream
        got = nms_cuda.efficient_nms_cuda(boxes.cuda(), scores.cuda(), **attrs)
    stream.synchronize()
    assert_same_detections(got, expected)
    if name == "per_class":
        assert got[0][1, 0] == 0 and got[0].sum() > 0


@pytest.mark.gpu
def test_public_op_uses_the_kernel_on_cuda_and_matches_the_cpu() -> None:
    from torchtrt_ext.ops import efficient_nms

    boxes, scores = case(3, 2, 500, 6)
    expected = efficient_nms(boxes, scores, class_agnostic=True)
    got = efficient_nms(boxes.cuda(), scores.cuda(), class_agnostic=True)
    assert all(t.is_cuda for t in got)
    assert_same_detections(got, expected)


def assert_reference_detections(got: tuple, boxes: torch.Tensor, scores: torch.Tensor, **attrs: int | float) -> None:
    """`got` holds tests/ops/nms_reference.py's detections on the same (dtype-rounded) values, zeros past them."""
    num, out_boxes, out_scores, out_classes = (t.cpu() for t in got)
    boxes_np, scores_np = boxes.float().numpy(), scores.float().numpy()
    assert out_boxes.shape == (boxes.shape[0], attrs["max_output_boxes"], 4)
    for image, kept in enumerate(reference_nms(boxes_np, scores_np, **attrs)):
        n = len(kept)
        assert num[image, 0].item() == n, f"image {image}"
        assert out_classes[image, :n].tolist() == [c for _, c, _ in kept], f"image {image}"
        assert out_scores[image, :n].float().tolist() == [s for _, _, s in kept], f"image {image}"
        kept_boxes = boxes_np[image, [a for a, _, _ in kept]].tolist()
        assert out_boxes[image, :n].float().tolist() == kept_boxes, f"image {image}"
        assert not out_boxes[image, n:].any() and not out_scores[image, n:].any() and not out_classes[image, n:].any()


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(boundary_cases()))
@pytest.mark.parametrize("dtype", list(nms_cuda.LAUNCHERS))
def test_kernels_on_boundary_cases_match_the_reference(name: str, dtype: torch.dtype) -> None:
    boxes, scores, fields = boundary_cases()[name]
    attrs = {**DEFAULTS, **{k: int(v) if isinstance(v, bool) else v for k, v in fields.items()}}
    boxes_t, scores_t = torch.from_numpy(boxes).to(dtype), torch.from_numpy(scores).to(dtype)
    got = nms_cuda.efficient_nms_cuda(boxes_t.cuda(), scores_t.cuda(), **attrs)
    torch.cuda.synchronize()
    assert_reference_detections(got, boxes_t, scores_t, **attrs)
