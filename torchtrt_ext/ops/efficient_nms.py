"""EfficientNMS: fixed-size, batched non-maximum suppression with the inputs, outputs and fields of TensorRT's own
``EfficientNMS_TRT`` plugin (``plugin/efficientNMSPlugin`` in the public NVIDIA/TensorRT repository).

Inputs: ``boxes [B, A, 4]`` (corners ``x1, y1, x2, y2``, or ``cx, cy, w, h`` with ``box_coding=1``) and
``scores [B, A, C]``, of one floating type. Per image, every (anchor, class) pair whose score (after a sigmoid when
``score_activation=1``) is above ``score_threshold`` and whose class is not ``background_class`` is a candidate;
candidates are visited by score, highest first (ties: lower ``anchor * C + class`` first), and one is kept unless a
kept candidate of the same class (any class with ``class_agnostic=1``) overlaps it with an IoU above
``iou_threshold``; the first ``max_output_boxes`` kept are the result. IoU is computed in float32 on corners put in
order (``min``/``max`` of each pair), and is 0 when the intersection, an area or the union is not positive.

Outputs: ``num_detections [B, 1] int32``, ``detection_boxes [B, K, 4]`` (always corners), ``detection_scores [B, K]``
(after the sigmoid), ``detection_classes [B, K] int32``, ``K = max_output_boxes``; entries past ``num_detections``
are zeros.

Where TensorRT's plugin differs (the table in docs/detection-nms.md lists every difference): it keeps at most the 5000
best candidates per image before suppression (2000 on Jetson TX1/TX2); it keeps scores ``>=`` the threshold and
suppresses at IoU ``>=`` the threshold (here, as in ONNX ``NonMaxSuppression``: ``>``); it refuses
``iou_threshold=0``; with float16 inputs it sorts on a reduced-precision score; it takes no bfloat16. The
decomposition uses ONNX ``NonMaxSuppression`` (float32) and gives the same detections as the eager op.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError, failure
from torchtrt_ext.ops._torch_op import define_op
from torchtrt_ext.ops.spec import (
    DOMAIN,
    PROVIDER_OURS,
    PROVIDER_TENSORRT,
    Attr,
    Decomposer,
    OpSpec,
    PluginRef,
    Shape,
)

_NAME = "EfficientNMS_TRT"
BOX_CODINGS = {"xyxy": 0, "cxcywh": 1}
_BLOCK = 512  # candidates resolved together by the eager greedy pass (one [B, BLOCK, BLOCK] IoU matrix)
_FLOAT = 1  # onnx.TensorProto.FLOAT
_INT32 = 6  # onnx.TensorProto.INT32
_BOOL = 9  # onnx.TensorProto.BOOL


def _unit_interval(value: float) -> bool:
    return 0.0 <= value <= 1.0


# ------------------------------------------------------------------------------------------------ eager math
def box_corners(boxes: torch.Tensor, box_coding: int) -> torch.Tensor:
    """``boxes [..., 4]`` as float32 corners ``x1, y1, x2, y2`` (from ``cx, cy, w, h`` when ``box_coding == 1``)."""
    boxes = boxes.float()
    if box_coding == 0:
        return boxes
    center, half = boxes[..., :2], boxes[..., 2:] * 0.5
    return torch.cat([center - half, center + half], dim=-1)


def pairwise_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU ``[B, M, N]`` of float32 corner boxes ``a [B, M, 4]`` and ``b [B, N, 4]`` (0 where not positive)."""
    def ordered(boxes: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x1, y1, x2, y2 = boxes.unbind(-1)
        return torch.minimum(x1, x2), torch.minimum(y1, y2), torch.maximum(x1, x2), torch.maximum(y1, y2)

    ax1, ay1, ax2, ay2 = (t[:, :, None] for t in ordered(a))
    bx1, by1, bx2, by2 = (t[:, None, :] for t in ordered(b))
    width = (torch.minimum(ax2, bx2) - torch.maximum(ax1, bx1)).clamp_min(0)
    height = (torch.minimum(ay2, by2) - torch.maximum(ay1, by1)).clamp_min(0)
    inter = width * height
    area_a, area_b = (ax2 - ax1) * (ay2 - ay1), (bx2 - bx1) * (by2 - by1)
    union = area_a + area_b - inter
    positive = (inter > 0) & (area_a > 0) & (area_b > 0) & (union > 0)
    return torch.where(positive, inter / union.masked_fill(~positive, 1), torch.zeros((), device=a.device))


def _greedy_block(boxes: torch.Tensor, classes: torch.Tensor, alive: torch.Tensor, iou_threshold: float,
                  class_agnostic: int) -> torch.Tensor:
    """Greedy NMS inside one block of score-ordered candidates: which of the ``alive`` ones are kept ``[B, M]``.

    ``keep[i] = alive[i] and no kept j < i suppresses i`` has one solution (by induction on i); iterating it from
    ``keep = alive`` fixes one more position per round, and stops as soon as nothing changes (the chain of
    suppressions is short in practice), so there is no loop over boxes.
    """
    overlaps = pairwise_iou(boxes, boxes) > iou_threshold
    if not class_agnostic:
        overlaps &= classes[:, :, None] == classes[:, None, :]
    m = boxes.shape[1]
    overlaps &= torch.ones(m, m, dtype=torch.bool, device=boxes.device).triu(1)  # [j, i]: j ranks before i
    keep = alive
    while True:
        refined = alive & ~(keep[:, :, None] & overlaps).any(1)
        if torch.equal(refined, keep):
            return keep
        keep = refined


def _eager(boxes: torch.Tensor, scores: torch.Tensor, score_threshold: float, iou_threshold: float,
           max_output_boxes: int, background_class: int, score_activation: int, class_agnostic: int,
           box_coding: int) -> tuple[torch.Tensor, ...]:
    batch, anchors, classes = scores.shape
    k, device = max_output_boxes, scores.device
    corners = box_corners(boxes, box_coding)
    probs = scores.float().sigmoid() if score_activation else scores.float()
    candidate = probs > score_threshold
    if 0 <= background_class < classes:
        candidate[..., background_class] = False
    flat = probs.masked_fill(~candidate, float("-inf")).reshape(batch, anchors * classes)
    order_scores, order = torch.sort(flat, dim=1, descending=True, stable=True)
    counts = candidate.reshape(batch, anchors * classes).sum(1)
    kept_score = torch.zeros(batch, k, device=device)
    kept_box = torch.zeros(batch, k, 4, device=device)
    kept_class = torch.full((batch, k), -1, dtype=torch.long, device=device)
    kept_n = torch.zeros(batch, dtype=torch.long, device=device)
    rows = torch.arange(batch, device=device)[:, None]
    slots = torch.arange(k, device=device)
    for start in range(0, int(counts.max()) if counts.numel() else 0, _BLOCK):
        if bool((kept_n >= k).all()):
            break
        index = order[:, start:start + _BLOCK]
        block_box, block_class = corners[rows, index // classes], index % classes
        alive = torch.arange(start, start + index.shape[1], device=device)[None, :] < counts[:, None]
        blocked = pairwise_iou(block_box, kept_box) > iou_threshold
        if not class_agnostic:
            blocked &= block_class[:, :, None] == kept_class[:, None, :]
        alive &= ~(blocked & (slots < kept_n[:, None])[:, None, :]).any(-1)
        keep = _greedy_block(block_box, block_class, alive, iou_threshold, class_agnostic)
        slot = kept_n[:, None] + keep.cumsum(1) - 1
        take = keep & (slot < k)
        b, m = take.nonzero(as_tuple=True)
        kept_box[b, slot[b, m]] = block_box[b, m]
        kept_class[b, slot[b, m]] = block_class[b, m]
        kept_score[b, slot[b, m]] = order_scores[b, start + m]
        kept_n += take.sum(1)
    valid = slots < kept_n[:, None]
    return (kept_n.to(torch.int32)[:, None], (kept_box * valid[..., None]).to(boxes.dtype),
            (kept_score * valid).to(scores.dtype), kept_class.clamp_min(0).to(torch.int32))


def _cuda(boxes: torch.Tensor, scores: torch.Tensor, **attrs: Any) -> tuple[torch.Tensor, ...]:
    from torchtrt_ext.ops._efficient_nms_cuda import efficient_nms_cuda

    return efficient_nms_cuda(boxes, scores, **attrs)


# --------------------------------------------------------------------------------------------- shapes, checks
def _prepare(shapes: list[Shape], dtypes: list[torch.dtype], **attrs: Any) -> dict[str, Any]:
    boxes, scores = shapes
    if len(boxes) != 3 or _known(boxes[2]) not in (None, 4):
        raise InvalidInputError(failure(f"{_NAME}: input 'boxes' has shape {list(boxes)}", "[batch, anchors, 4]",
                                        "reshape the boxes, e.g. boxes.reshape(batch, -1, 4)"))
    if len(scores) != 3:
        raise InvalidInputError(failure(f"{_NAME}: input 'scores' has shape {list(scores)}", "[batch, anchors, classes]",
                                        "reshape the scores, e.g. scores.reshape(batch, anchors, -1)"))
    for axis, what in ((0, "batch"), (1, "anchors")):
        if None not in (_known(boxes[axis]), _known(scores[axis])) and boxes[axis] != scores[axis]:
            raise InvalidInputError(failure(
                f"{_NAME}: boxes {list(boxes)} and scores {list(scores)} differ in dimension {axis} ({what})",
                f"the same {what} in both", "pass one score row per box (scores[b, a] belongs to boxes[b, a])"))
    if dtypes[0] != dtypes[1]:
        raise InvalidInputError(failure(f"{_NAME}: boxes are {dtypes[0]} and scores {dtypes[1]}", "one dtype for both",
                                        "cast one of them, e.g. scores.to(boxes.dtype)"))
    return attrs


def _known(dim: Any) -> int | None:
    """A dimension's value when it is a plain int (symbolic dims of an export are left to the runtime)."""
    return dim if isinstance(dim, int) else None


def _shape_rule(shapes: list[Shape], dtypes: list[torch.dtype], max_output_boxes: int,
                **_: Any) -> list[tuple[Shape, torch.dtype]]:
    batch, k = shapes[1][0], max_output_boxes
    return [((batch, 1), torch.int32), ((batch, k, 4), dtypes[0]), ((batch, k), dtypes[0]), ((batch, k), torch.int32)]


# ---------------------------------------------------------------------------------------------- decomposition
def _decompose(d: Decomposer, inputs: list[str], outputs: list[str], score_threshold: float, iou_threshold: float,
               max_output_boxes: int, background_class: int, score_activation: int, class_agnostic: int,
               box_coding: int) -> None:
    """ONNX NonMaxSuppression, then a per-image top-K of the selected scores, padded to the fixed-size outputs.

    Every attribute enters as a tensor (``d.const``) and the structural ones (score activation, box coding, class
    agnostic) select with ``Where`` on a scalar condition, so the same nodes serve every node of the op as its ONNX
    function; once inlined, each condition is a constant.
    """
    def flag(value: int) -> str:  # a 0/1 attribute as a bool scalar
        return d.op("Cast", d.const(value, np.int64), to=_BOOL)

    boxes, scores = (d.op("Cast", name, to=_FLOAT) for name in inputs)
    center = d.op("Slice", boxes, d.const([0], np.int64), d.const([2], np.int64), d.const([2], np.int64))
    size = d.op("Slice", boxes, d.const([2], np.int64), d.const([4], np.int64), d.const([2], np.int64))
    half = d.op("Mul", size, d.const(0.5))
    corners = d.op("Concat", d.op("Sub", center, half), d.op("Add", center, half), axis=2)
    boxes = d.op("Where", flag(box_coding), corners, boxes)
    scores = d.op("Where", flag(score_activation), d.op("Sigmoid", scores), scores)
    dims = d.op("Shape", scores)  # [B, A, C]
    batch, anchors, classes = (d.op("Slice", dims, d.const([i], np.int64), d.const([i + 1], np.int64))
                               for i in range(3))
    pairs = d.op("Mul", anchors, classes)
    class_ids = d.op("Range", d.const(0, np.int64), d.op("Squeeze", classes), d.const(1, np.int64))
    scores = d.op("Where", d.op("Equal", class_ids, d.const(background_class, np.int64)),  # -1 matches no class
                  d.const(float("-inf")), scores)
    flat_scores = d.op("Reshape", scores, d.op("Concat", batch, pairs, axis=0))  # [B, A*C], pair p = a*C + c
    k = d.const([max_output_boxes], np.int64)
    agnostic, one = flag(class_agnostic), d.const([1], np.int64)
    # NMS classes G and boxes per anchor R: class-agnostic, one class whose candidates are the pairs, each with its
    # anchor's box (G=1, R=C); else C classes over the A boxes (G=C, R=1), the scores in class-major order c*A + a.
    groups = d.op("Where", agnostic, one, classes)
    repeat = d.op("Where", agnostic, classes, one)
    position = d.op("Range", d.const(0, np.int64), d.op("Squeeze", pairs), d.const(1, np.int64))
    class_major = d.op("Add", d.op("Mul", d.op("Mod", position, anchors), classes), d.op("Div", position, anchors))
    nms_scores = d.op("Reshape", d.op("Gather", flat_scores, d.op("Where", agnostic, position, class_major), axis=1),
                      d.op("Concat", batch, groups, d.op("Div", pairs, groups), axis=0))
    nms_boxes = d.op("Reshape", d.op("Expand", d.op("Unsqueeze", boxes, d.const([2], np.int64)),
                                     d.op("Concat", batch, anchors, repeat, d.const([4], np.int64), axis=0)),
                     d.op("Concat", batch, d.op("Mul", anchors, repeat), d.const([4], np.int64), axis=0))
    selected = d.op("NonMaxSuppression", nms_boxes, nms_scores, k, d.const([iou_threshold]),
                    d.const([score_threshold]))
    # the selected (class g, box i) as the pair index: i with G=1, i*C + g with G=C
    pair = d.op("Add", d.op("Mul", d.op("Gather", selected, d.const(2, np.int64), axis=1), groups),
                d.op("Gather", selected, d.const(1, np.int64), axis=1))
    where = d.op("Concat", d.op("Gather", selected, d.const([0], np.int64), axis=1),
                 d.op("Unsqueeze", pair, d.const([1], np.int64)), axis=1)  # [N, 2]: (image, pair)
    # Every selected score scattered into a [B, A*C + K] row of -inf (K spare columns: TopK always has K entries);
    # TopK then orders each image's detections by score, lower pair index first on ties.
    dense = d.op("ConstantOfShape", d.op("Concat", batch, d.op("Add", pairs, k), axis=0),
                 value=_tensor(np.array([-np.inf], np.float32)))
    dense = d.op("ScatterND", dense, where, d.op("GatherND", flat_scores, where))
    top_scores, top_index = d.op_outputs("TopK", dense, k, count=2, axis=1, largest=1, sorted=1)
    valid = d.op("Greater", top_scores, d.const(float("-inf")))
    top_index = d.op("Where", valid, top_index, d.const(0, np.int64))
    box_index = d.op("Unsqueeze", d.op("Div", top_index, classes), d.const([2], np.int64))
    top_boxes = d.op("GatherND", boxes, box_index, batch_dims=1)
    zero = d.const(0.0)
    d.reduce("ReduceSum", d.op("Cast", valid, to=_INT32), [1], keepdims=True, out=outputs[0])
    d.op("CastLike", d.op("Where", d.op("Unsqueeze", valid, d.const([2], np.int64)), top_boxes, zero), inputs[0],
         out=outputs[1])
    d.op("CastLike", d.op("Where", valid, top_scores, zero), inputs[1], out=outputs[2])
    d.op("Cast", d.op("Mod", top_index, classes), to=_INT32, out=outputs[3])


def _tensor(array: np.ndarray) -> Any:
    import onnx

    return onnx.numpy_helper.from_array(array)


# ------------------------------------------------------------------------------------------------------ the op
SPEC = OpSpec(
    name=_NAME,
    inputs=("boxes", "scores"),
    outputs=("num_detections", "detection_boxes", "detection_scores", "detection_classes"),
    attrs=(
        Attr("score_threshold", "float", default=0.25, doc="candidates need a score above it",
             check=_unit_interval, allowed="a float in [0, 1]"),
        Attr("iou_threshold", "float", default=0.45, doc="a kept box removes later ones overlapping it above this IoU",
             check=_unit_interval, allowed="a float in [0, 1]"),
        Attr("max_output_boxes", "int", default=100, doc="K, detections per image", check=lambda v: v >= 1,
             allowed="an int >= 1"),
        Attr("background_class", "int", default=-1, doc="class never detected; -1 for none", check=lambda v: v >= -1,
             allowed="an int >= -1"),
        Attr("score_activation", "int", default=0, doc="1: apply a sigmoid to the scores", check=lambda v: v in (0, 1),
             allowed="0 or 1 (False or True)"),
        Attr("class_agnostic", "int", default=0, doc="1: boxes of different classes suppress each other",
             check=lambda v: v in (0, 1), allowed="0 or 1 (False or True)"),
        Attr("box_coding", "int", default=0, doc="0: x1, y1, x2, y2; 1: cx, cy, w, h", check=lambda v: v in (0, 1),
             allowed=f"0 or 1 (box_coding={list(BOX_CODINGS)})"),
    ),
    eager=_eager,
    shape_rule=_shape_rule,
    decompose=_decompose,
    prepare=_prepare,
    cuda=_cuda,
    output_dtypes=(torch.int32, None, None, torch.int32),
    plugin=PluginRef(_NAME, "1", "", PROVIDER_TENSORRT),  # TensorRT's own creators live in namespace ""
    fallback_plugin=PluginRef(_NAME, "1", DOMAIN, PROVIDER_OURS),  # csrc/plugins/efficient_nms, for TensorRT-RTX
    differentiable=False,
    torch_name="efficient_nms",
    doc="fixed-size batched NMS with the fields and outputs of TensorRT's EfficientNMS_TRT plugin",
)

EFFICIENT_NMS = define_op(SPEC)


def efficient_nms(boxes: torch.Tensor, scores: torch.Tensor, *, score_threshold: float = 0.25,
                  iou_threshold: float = 0.45, max_output_boxes: int = 100, background_class: int = -1,
                  score_activation: bool = False, class_agnostic: bool = False,
                  box_coding: str = "xyxy") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batched NMS to fixed-size outputs ``(num_detections, boxes, scores, classes)``; one ``EfficientNMS_TRT`` node.

    ``box_coding`` is ``"xyxy"`` or ``"cxcywh"``; the semantics are in this module's docstring.
    """
    if box_coding not in BOX_CODINGS:
        raise InvalidAttributeError(f"{_NAME}: argument box_coding={box_coding!r} is not allowed. "
                                    f"Allowed: {list(BOX_CODINGS)}.")
    flags = {"score_activation": score_activation, "class_agnostic": class_agnostic}
    for name, value in flags.items():
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise InvalidAttributeError(f"{_NAME}: argument {name}={value!r} is not allowed. Allowed: True or False.")
    outs: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor] = EFFICIENT_NMS(
        boxes, scores, score_threshold=score_threshold, iou_threshold=iou_threshold, max_output_boxes=max_output_boxes,
        background_class=background_class, box_coding=BOX_CODINGS[box_coding], **{k: int(v) for k, v in flags.items()})
    return outs
