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
