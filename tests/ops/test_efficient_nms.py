"""EfficientNMS: eager results against a plain-Python NMS, both exporters, the decomposition in onnxruntime, bad input."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError
from torchtrt_ext.ops import efficient_nms
from tests.helpers import node_attrs, run_onnx, single_custom_node
from tests.ops.nms_reference import boundary_cases, boundary_is_hit, overlapping_boxes, reference_nms

EXPORTERS = ["legacy", "dynamo"]
CODINGS = {0: "xyxy", 1: "cxcywh"}
FIELDS = {"score_threshold": 0.3, "iou_threshold": 0.5, "max_output_boxes": 20, "background_class": -1,
          "score_activation": 0, "class_agnostic": 0, "box_coding": 0}


def random_case(seed: int, batch: int = 3, anchors: int = 150, classes: int = 4, box_coding: int = 0,
                raw_scores: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    boxes = overlapping_boxes(rng, batch, anchors, box_coding=box_coding)
    scores = rng.normal(-1.0, 1.5, size=(batch, anchors, classes)) if raw_scores else rng.uniform(
        0, 1, size=(batch, anchors, classes)) ** 2
    return torch.from_numpy(boxes), torch.from_numpy(scores.astype(np.float32))


def check_against_reference(outputs: tuple, boxes: torch.Tensor, scores: torch.Tensor, **fields: int | float) -> None:
    """Outputs equal the reference detections: same count, classes, boxes and scores, zeros past the count."""
    num, out_boxes, out_scores, out_classes = (torch.as_tensor(o) for o in outputs)
    k = fields["max_output_boxes"]
    expected = reference_nms(boxes.float().numpy(), scores.float().numpy(), **fields)
    assert num.dtype == out_classes.dtype == torch.int32 and num.shape == (boxes.shape[0], 1)
    assert out_boxes.shape == (boxes.shape[0], k, 4) and out_scores.shape == out_classes.shape == (boxes.shape[0], k)
    for b, kept in enumerate(expected):
        n = len(kept)
        assert num[b, 0].item() == n
        assert out_classes[b, :n].tolist() == [c for _, c, _ in kept]
        ref_scores = torch.tensor([s for _, _, s in kept], dtype=torch.float32)
        torch.testing.assert_close(out_scores[b, :n].float(), ref_scores.to(out_scores.dtype).float(), rtol=1e-6,
                                   atol=1e-6)
        ref_boxes = torch.stack([_corners(boxes[b, a].float(), fields["box_coding"]) for a, _, _ in kept]) if n else \
            torch.zeros(0, 4)
        torch.testing.assert_close(out_boxes[b, :n].float(), ref_boxes.to(out_boxes.dtype).float(), rtol=0, atol=0)
        assert not out_boxes[b, n:].any() and not out_scores[b, n:].any() and not out_classes[b, n:].any()


def _corners(box: torch.Tensor, box_coding: int) -> torch.Tensor:
    if box_coding == 0:
        return box
    half = box[2:] * 0.5
    return torch.cat([box[:2] - half, box[:2] + half])


@pytest.mark.parametrize("box_coding", [0, 1])
@pytest.mark.parametrize("class_agnostic", [0, 1])
@pytest.mark.parametrize("score_activation", [0, 1])
def test_eager_matches_reference(box_coding: int, class_agnostic: int, score_activation: int) -> None:
    boxes, scores = random_case(box_coding + 2 * class_agnostic + 4 * score_activation, box_coding=box_coding,
                                raw_scores=bool(score_activation))
    fields = {**FIELDS, "box_coding": box_coding, "class_agnostic": class_agnostic,
              "score_activation": score_activation}
    outputs = efficient_nms(boxes, scores, score_threshold=0.3, iou_threshold=0.5, max_output_boxes=20,
                            box_coding=CODINGS[box_coding], class_agnostic=bool(class_agnostic),
                            score_activation=bool(score_activation))
    check_against_reference(outputs, boxes, scores, **fields)
    assert outputs[0].min() > 0  # the case has detections in every image


def test_many_candidates_span_several_blocks_and_k_cuts_them() -> None:
    boxes, scores = random_case(7, batch=2, anchors=500, classes=2)  # ~550 candidates per image: 2 eager blocks
    assert ((scores > 0.2).sum((1, 2)) > 512).all()
    counts = []
    for k in (5, 1000):
        fields = {**FIELDS, "score_threshold": 0.2, "iou_threshold": 0.3, "class_agnostic": 1, "max_output_boxes": k}
        outputs = efficient_nms(boxes, scores, score_threshold=0.2, iou_threshold=0.3, max_output_boxes=k,
                                class_agnostic=True)
        check_against_reference(outputs, boxes, scores, **fields)
        counts.append(outputs[0][:, 0].tolist())
    assert counts[0] == [5, 5] and all(5 < n < 1000 for n in counts[1])  # cut at K; padded past the survivors


def test_background_class_and_images_without_detections() -> None:
    boxes, scores = random_case(3, batch=3, anchors=60, classes=3)
    scores[1] = 0.1  # nothing above the threshold in image 1
    fields = {**FIELDS, "background_class": 0}
    outputs = efficient_nms(boxes, scores, score_threshold=0.3, iou_threshold=0.5, max_output_boxes=20,
                            background_class=0)
    check_against_reference(outputs, boxes, scores, **fields)
    assert outputs[0][1, 0] == 0 and 0 not in outputs[3][0, :outputs[0][0, 0]].tolist()


BOUNDARY = boundary_cases()


def nms_fields(fields: dict) -> dict:
    """The reference's keywords for a case's fields (defaults filled, flags as ints)."""
    full = {**FIELDS, "max_output_boxes": 100, **fields}
    return {k: int(v) if isinstance(v, bool) else v for k, v in full.items()}


@pytest.mark.parametrize("name", list(BOUNDARY))
def test_boundary_cases_sit_on_their_boundary(name: str) -> None:
    """Each boundary case's answer changes when its setting moves just off the boundary, so the op tests below see
    a comparison of the wrong sense (>= for >), a background class ignored or an early stop."""
    boxes, scores, fields = BOUNDARY[name]
    field, off = boundary_is_hit(name)
    fields = nms_fields(fields)
    assert reference_nms(boxes, scores, **fields) != reference_nms(boxes, scores, **{**fields, field: off})


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", list(BOUNDARY))
def test_eager_on_boundary_cases_matches_reference(name: str, dtype: torch.dtype) -> None:
    """Scores and IoUs exactly on the thresholds are kept (the semantics say "above"), background class 0 is never
    detected, an image saturating K does not stop the others, equal scores keep the lower pair first."""
    boxes, scores, fields = BOUNDARY[name]
    fields = nms_fields(fields)
    b, s = torch.from_numpy(boxes).to(dtype), torch.from_numpy(scores).to(dtype)
    outputs = efficient_nms(b, s, **{**fields, "box_coding": CODINGS[fields["box_coding"]],
                                     "class_agnostic": bool(fields["class_agnostic"]),
                                     "score_activation": bool(fields["score_activation"])})
    check_against_reference(outputs, b, s, **fields)


def nms_model(batch: int, anchors: int, classes: int, **fields: object) -> onnx.ModelProto:
    """A float32 model of one EfficientNMS_TRT node with `fields`."""
    k = int(fields["max_output_boxes"])  # type: ignore[call-overload]
    node = torchtrt_ext.ops.get_op("EfficientNMS_TRT").spec.make_node(
        ["boxes", "scores"], ["num", "det_boxes", "det_scores", "det_classes"], name="nms", **fields)
    fp32, i32 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT32
    graph = onnx.helper.make_graph(
        [node], "g", [onnx.helper.make_tensor_value_info("boxes", fp32, [batch, anchors, 4]),
                      onnx.helper.make_tensor_value_info("scores", fp32, [batch, anchors, classes])],
        [onnx.helper.make_tensor_value_info(n, t, sh) for n, t, sh in
         (("num", i32, [batch, 1]), ("det_boxes", fp32, [batch, k, 4]), ("det_scores", fp32, [batch, k]),
          ("det_classes", i32, [batch, k]))])
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18),
                                                        onnx.helper.make_opsetid("torchtrt_ext", 1)])


@pytest.mark.parametrize("name", list(BOUNDARY))
def test_decomposition_on_boundary_cases_matches_reference(name: str) -> None:
    """The decomposition (ONNX NonMaxSuppression + TopK) in onnxruntime gives the reference's detections on the
    boundary cases, background class 0 among them."""
    boxes, scores, fields = BOUNDARY[name]
    fields = nms_fields(fields)
    model = torchtrt_ext.passes.decompose_custom_ops(nms_model(*scores.shape, **fields))
    got = run_onnx(model, {"boxes": torch.from_numpy(boxes), "scores": torch.from_numpy(scores)})
    check_against_reference(tuple(got), torch.from_numpy(boxes), torch.from_numpy(scores), **fields)


@pytest.mark.parametrize("box_coding", [0, 1])
@pytest.mark.parametrize("class_agnostic", [0, 1])
@pytest.mark.parametrize("score_activation", [0, 1])
def test_decomposition_matches_reference(box_coding: int, class_agnostic: int, score_activation: int) -> None:
    """The decomposition in onnxruntime on hand-built nodes, every box coding, class mode and activation (the
    exported-model tests take minutes a run; these are what the mutation preset runs)."""
    boxes, scores = random_case(box_coding + 2 * class_agnostic + 4 * score_activation, batch=2, anchors=60,
                                box_coding=box_coding, raw_scores=bool(score_activation))
    fields = {**FIELDS, "box_coding": box_coding, "class_agnostic": class_agnostic,
              "score_activation": score_activation}
    model = torchtrt_ext.passes.decompose_custom_ops(nms_model(*scores.shape, **fields))
    got = run_onnx(model, {"boxes": boxes, "scores": scores})
    check_against_reference(tuple(got), boxes, scores, **fields)
    assert got[0].min() > 0  # the case has detections in every image


@pytest.mark.parametrize("batch,anchors,classes", [(0, 5, 3), (2, 0, 3), (2, 5, 0)])
def test_empty_inputs_give_fixed_size_zeros(batch: int, anchors: int, classes: int) -> None:
    outputs = efficient_nms(torch.rand(batch, anchors, 4), torch.rand(batch, anchors, classes), max_output_boxes=3)
    assert [tuple(o.shape) for o in outputs] == [(batch, 1), (batch, 3, 4), (batch, 3), (batch, 3)]
    assert not any(o.any() for o in outputs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_inputs_give_the_reference_on_their_values(dtype: torch.dtype) -> None:
    boxes, scores = random_case(11)
    boxes, scores = boxes.to(dtype), scores.to(dtype)
    outputs = efficient_nms(boxes, scores, score_threshold=0.3, iou_threshold=0.5, max_output_boxes=20)
    assert outputs[1].dtype == outputs[2].dtype == dtype
    check_against_reference(outputs, boxes, scores, **FIELDS)


def test_asking_for_gradients_raises() -> None:
    boxes, scores = random_case(1)
    scores.requires_grad_(True)
    _, _, out_scores, _ = efficient_nms(boxes, scores)
    with pytest.raises(InvalidInputError, match="no gradient.*torch.no_grad"):
        out_scores.sum().backward()


@pytest.mark.parametrize("boxes_shape,scores_shape,dtype,match", [
    ((2, 10), (2, 10, 3), torch.float32, "'boxes' has shape"),
    ((2, 10, 5), (2, 10, 3), torch.float32, "'boxes' has shape"),
    ((2, 10, 4), (2, 10), torch.float32, "'scores' has shape"),
    ((2, 10, 4), (2, 11, 3), torch.float32, "differ in dimension 1 \\(anchors\\)"),
    ((2, 10, 4), (3, 10, 3), torch.float32, "differ in dimension 0 \\(batch\\)"),
    ((2, 10, 4), (2, 10, 3), torch.int64, "'boxes' has dtype torch.int64"),
])
def test_bad_inputs_raise_before_any_work(boxes_shape: tuple, scores_shape: tuple, dtype: torch.dtype,
                                          match: str) -> None:
    boxes = torch.zeros(boxes_shape, dtype=dtype)
    with pytest.raises(InvalidInputError, match=match):
        efficient_nms(boxes, torch.zeros(scores_shape))


@pytest.mark.parametrize("kwargs,match", [
    ({"score_threshold": 1.5}, "score_threshold=1.5 is not allowed. Allowed: a float in \\[0, 1\\]"),
    ({"iou_threshold": -0.1}, "iou_threshold=-0.1 is not allowed"),
    ({"max_output_boxes": 0}, "max_output_boxes=0 is not allowed. Allowed: an int >= 1"),
    ({"box_coding": "yxyx"}, "box_coding='yxyx' is not allowed. Allowed: \\['xyxy', 'cxcywh'\\]"),
    ({"class_agnostic": "yes"}, "class_agnostic='yes' is not allowed"),
])
def test_bad_attributes_raise(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidAttributeError, match=match):
        efficient_nms(torch.zeros(1, 4, 4), torch.zeros(1, 4, 2), **kwargs)


def test_mixed_dtypes_raise() -> None:
    with pytest.raises(InvalidInputError, match="one dtype for both"):
        efficient_nms(torch.zeros(1, 4, 4), torch.zeros(1, 4, 2, dtype=torch.float16))


class Detector(torch.nn.Module):
    """A tiny head: a linear layer gives boxes and class logits (-100 where the first feature is below -5), NMS gives
    the fixed-size outputs."""

    def __init__(self, classes: int = 3, **nms: object) -> None:
        super().__init__()
        self.head = torch.nn.Linear(8, 4 + classes)
        self.nms = nms

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.head(features)
        logits = out[..., 4:] - 100 * (features[..., :1] < -5).to(out.dtype)
        return efficient_nms(out[..., :4], logits if self.nms.get("score_activation") else logits.sigmoid(),
                             **self.nms)


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_export_emits_one_efficientnms_trt_node(exporter: str) -> None:
    model = Detector(score_threshold=0.4, max_output_boxes=7, class_agnostic=True, box_coding="cxcywh").eval()
    onnx_model = torchtrt_ext.export_onnx(model, (torch.randn(2, 30, 8),), exporter=exporter)
    node = single_custom_node(onnx_model)
    assert node.op_type == "EfficientNMS_TRT" and len(node.input) == 2 and len(node.output) == 4
    attrs = node_attrs(node)
    assert attrs == pytest.approx({"score_threshold": 0.4, "iou_threshold": 0.45, "max_output_boxes": 7,
                                   "background_class": -1, "score_activation": 0, "class_agnostic": 1,
                                   "box_coding": 1, "plugin_version": b"1", "plugin_namespace": b""})
    kinds = {a.name: a.type for a in node.attribute}
    assert {kinds[n] for n in ("max_output_boxes", "background_class", "score_activation", "class_agnostic",
                               "box_coding")} == {onnx.AttributeProto.INT}
    assert {kinds[n] for n in ("score_threshold", "iou_threshold")} == {onnx.AttributeProto.FLOAT}
    types = {o.name: o.type.tensor_type.elem_type for o in onnx_model.graph.output}
    assert sorted(types.values()) == sorted([onnx.TensorProto.INT32, onnx.TensorProto.FLOAT,
                                             onnx.TensorProto.FLOAT, onnx.TensorProto.INT32])
    onnx.checker.check_model(onnx_model, full_check=True)


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("nms", [{}, {"class_agnostic": True, "box_coding": "cxcywh", "background_class": 1},
                                 {"score_activation": True, "max_output_boxes": 3}])
def test_decomposition_in_onnxruntime_gives_the_eager_detections(exporter: str, nms: dict) -> None:
    torch.manual_seed(0)
    model = Detector(score_threshold=0.3, iou_threshold=0.4, **nms).eval()
    features = torch.randn(3, 200, 8) * 2
    features[1] = -20  # image 1: every score far below the threshold
    onnx_model = torchtrt_ext.export_onnx(model, (features,), exporter=exporter)
    portable = torchtrt_ext.passes.decompose_custom_ops(onnx_model)
    assert not [n for n in portable.graph.node if n.domain == "torchtrt_ext"]
    assert "NonMaxSuppression" in {n.op_type for n in portable.graph.node}
    with torch.no_grad():
        expected = model(features)
    got = run_onnx(portable, {"features": features})
    assert expected[0][:, 0].tolist()[1] == 0 and expected[0].sum() > 0
    for e, g in zip(expected, got):
        assert g.dtype == e.numpy().dtype and g.shape == tuple(e.shape)
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-6, atol=1e-6)


def test_decomposition_keeps_half_outputs_half() -> None:
    boxes, scores = random_case(5, batch=2, anchors=40, classes=2)
    node = torchtrt_ext.ops.get_op("EfficientNMS_TRT").spec.make_node(
        ["boxes", "scores"], ["num", "det_boxes", "det_scores", "det_classes"], name="nms", max_output_boxes=10)
    fp16 = onnx.TensorProto.FLOAT16
    graph = onnx.helper.make_graph(
        [node], "g", [onnx.helper.make_tensor_value_info("boxes", fp16, [2, 40, 4]),
                      onnx.helper.make_tensor_value_info("scores", fp16, [2, 40, 2])],
        [onnx.helper.make_tensor_value_info(n, t, s) for n, t, s in
         (("num", onnx.TensorProto.INT32, [2, 1]), ("det_boxes", fp16, [2, 10, 4]), ("det_scores", fp16, [2, 10]),
          ("det_classes", onnx.TensorProto.INT32, [2, 10]))])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18),
                                                         onnx.helper.make_opsetid("torchtrt_ext", 1)])
    got = run_onnx(torchtrt_ext.passes.decompose_custom_ops(model), {"boxes": boxes.half(), "scores": scores.half()})
    expected = efficient_nms(boxes.half(), scores.half(), max_output_boxes=10)
    for e, g in zip(expected, got):
        assert g.dtype == e.numpy().dtype
        np.testing.assert_array_equal(g, e.numpy())
