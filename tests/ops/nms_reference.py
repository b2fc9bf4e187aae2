"""A straightforward NMS in plain Python (float32 numpy arithmetic), the reference the efficient_nms tests compare with.

It is written from the op's documented semantics, one candidate at a time, sharing no code with the library.
"""
from __future__ import annotations

import numpy as np

f32 = np.float32


def corners(box: np.ndarray, box_coding: int) -> np.ndarray:
    """One box as float32 corners."""
    box = box.astype(f32)
    if box_coding == 0:
        return box
    half_w, half_h = box[2] * f32(0.5), box[3] * f32(0.5)
    return np.array([box[0] - half_w, box[1] - half_h, box[0] + half_w, box[1] + half_h], dtype=f32)


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two corner boxes in float32, 0 when the intersection, an area or the union is not positive."""
    ax1, ax2, ay1, ay2 = min(a[0], a[2]), max(a[0], a[2]), min(a[1], a[3]), max(a[1], a[3])
    bx1, bx2, by1, by2 = min(b[0], b[2]), max(b[0], b[2]), min(b[1], b[3]), max(b[1], b[3])
    width = max(f32(min(ax2, bx2) - max(ax1, bx1)), f32(0))
    height = max(f32(min(ay2, by2) - max(ay1, by1)), f32(0))
    inter = f32(width * height)
    area_a, area_b = f32((ax2 - ax1) * (ay2 - ay1)), f32((bx2 - bx1) * (by2 - by1))
    union = f32(f32(area_a + area_b) - inter)
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return 0.0
    return float(f32(inter / union))


def reference_nms(boxes: np.ndarray, scores: np.ndarray, score_threshold: float = 0.25, iou_threshold: float = 0.45,
                  max_output_boxes: int = 100, background_class: int = -1, score_activation: bool = False,
                  class_agnostic: bool = False, box_coding: int = 0) -> list[list[tuple[int, int, float]]]:
    """Per image, the detections as (anchor, class, score) in output order."""
    result = []
    for image_boxes, image_scores in zip(boxes, scores):
        probs = image_scores.astype(f32)
        if score_activation:
            probs = (1 / (1 + np.exp(-probs.astype(np.float64)))).astype(f32)
        anchors, classes = probs.shape
        candidates = [(float(probs[a, c]), a * classes + c) for a in range(anchors) for c in range(classes)
                      if probs[a, c] > f32(score_threshold) and c != background_class]
        candidates.sort(key=lambda sc: (-sc[0], sc[1]))
        kept: list[tuple[int, int, float]] = []
        for score, pair in candidates:
            if len(kept) == max_output_boxes:
                break
            anchor, cls = divmod(pair, classes)
            box = corners(image_boxes[anchor], box_coding)
            if all(iou(box, corners(image_boxes[a], box_coding)) <= iou_threshold
                   for a, c, _ in kept if class_agnostic or c == cls):
                kept.append((anchor, cls, score))
        result.append(kept)
    return result


def overlapping_boxes(rng: np.random.Generator, batch: int, anchors: int, clusters: int = 6,
                      box_coding: int = 0) -> np.ndarray:
    """Boxes gathered around a few centers, so that many overlap (in the given coding), float32 [B, A, 4]."""
    centers = rng.uniform(0.2, 0.8, size=(batch, clusters, 2))
    which = rng.integers(0, clusters, size=(batch, anchors))
    center = np.take_along_axis(centers, which[..., None], axis=1) + rng.normal(0, 0.03, size=(batch, anchors, 2))
    size = rng.uniform(0.05, 0.3, size=(batch, anchors, 2))
    if box_coding == 1:
        return np.concatenate([center, size], axis=-1).astype(f32)
    return np.concatenate([center - size / 2, center + size / 2], axis=-1).astype(f32)


def _grid_boxes(count: int, origin: float = 0.0) -> list[list[float]]:
    """`count` 1x1 corner boxes on a grid with gaps (no two overlap), at integer coordinates (exact in bfloat16)."""
    return [[origin + 3 * (i % 20), 3 * (i // 20), origin + 3 * (i % 20) + 1, 3 * (i // 20) + 1] for i in range(count)]


def boundary_cases() -> dict[str, tuple[np.ndarray, np.ndarray, dict]]:
    """Cases that sit exactly on a documented boundary, as name -> (boxes [B, A, 4], scores [B, A, C], fields).

    Every value is exact in float16 and bfloat16 (integer coordinates, scores of few bits), and the IoUs on the
    threshold are exact in float32 ([0, 0, 2, 1] and [0, 0, 2, 2]: intersection 2, union 4, IoU 0.5), so each case
    means the same in every dtype. `boundary_is_hit` says which setting each one is sensitive to.
    """
    half_overlap = [[0, 0, 2, 1], [0, 0, 2, 2], [1, 0, 3, 1], [5, 5, 6, 6]]  # IoU(0, 1) = 0.5, IoU(0, 2) = 1/3
    cases: dict[str, tuple[np.ndarray, np.ndarray, dict]] = {}
    # Scores exactly 0.5 with threshold 0.5: not candidates (the semantics say "above").
    cases["score_on_threshold"] = (
        np.array([half_overlap], f32),
        np.array([[[0.75, 0.5], [0.5, 0.625], [0.875, 0.5], [0.5, 0.5]]], f32),
        {"score_threshold": 0.5, "iou_threshold": 0.25, "max_output_boxes": 8})
    # Box 1 overlaps the kept box 0 with IoU exactly 0.5 = iou_threshold: kept (suppression needs "above").
    cases["iou_on_threshold"] = (
        np.array([half_overlap], f32),
        np.array([[[0.875, 0.125], [0.75, 0.125], [0.625, 0.125], [0.125, 0.25]]], f32),
        {"score_threshold": 0.2, "iou_threshold": 0.5, "max_output_boxes": 8})
    # The same, with the kept box and the one on the threshold more than 512 candidates apart (the eager op resolves
    # candidates 512 at a time: the second box is checked against the first one's block, not inside it).
    fillers = _grid_boxes(520, origin=100.0)
    boxes = np.array([[[0, 0, 2, 1]] + fillers + [[0, 0, 2, 2]]], f32)
    scores = np.concatenate([[0.96875], np.linspace(0.9375, 0.5, 520), [0.25]]).astype(f32)[None, :, None]
    cases["iou_on_threshold_across_blocks"] = (boxes, scores,
                                               {"score_threshold": 0.125, "iou_threshold": 0.5,
                                                "max_output_boxes": 600})
    # Class 0 scores highest everywhere but is the background.
    cases["background_class_0"] = (
        np.array([half_overlap], f32),
        np.array([[[0.96875, 0.5], [0.9375, 0.625], [0.90625, 0.75], [0.875, 0.875]]], f32),
        {"score_threshold": 0.25, "iou_threshold": 0.5, "max_output_boxes": 8, "background_class": 0})
    # Image 0 fills K from its first 512 candidates; image 1's first 520 candidates are one box repeated (one kept,
    # the rest suppressed), so its K detections need the candidates after them.
    image0 = _grid_boxes(600)
    image1 = [[0, 0, 1, 1]] * 520 + _grid_boxes(80, origin=200.0)
    ranks = np.linspace(0.96875, 0.5, 600).astype(f32)
    cases["one_image_saturates_k"] = (np.array([image0, image1], f32), np.stack([ranks, ranks])[:, :, None],
                                      {"score_threshold": 0.25, "iou_threshold": 0.5, "max_output_boxes": 5})
    # Equal scores: the lower anchor * C + class comes first (class-agnostic: it suppresses its equal twin).
    cases["equal_scores"] = (
        np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [4, 4, 5, 5]]], f32),
        np.array([[[0.75, 0.75], [0.75, 0.75], [0.75, 0.625]]], f32),
        {"score_threshold": 0.5, "iou_threshold": 0.5, "max_output_boxes": 3, "class_agnostic": True})
    return cases


def boundary_is_hit(name: str) -> tuple[str, float]:
    """The field a boundary case sits on and a value just off it that changes the reference's answer."""
    return {"score_on_threshold": ("score_threshold", 0.4990234375),
            "iou_on_threshold": ("iou_threshold", 0.4990234375),
            "iou_on_threshold_across_blocks": ("iou_threshold", 0.4990234375),
            "background_class_0": ("background_class", -1),
            "one_image_saturates_k": ("max_output_boxes", 1),
            "equal_scores": ("class_agnostic", False)}[name]
