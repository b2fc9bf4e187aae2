"""Each built-in op's ONNX function: one body, generic over the op's attributes and input shapes. Two nodes of one op
with different attributes and shapes in one model, the function stored once, each node right on onnxruntime (which
runs the body, no pass) against the eager op, in every dtype the op declares; ``onnx.checker`` (full check) accepts
the model. A decomposition that bakes an attribute's value in gets no generic body."""
from __future__ import annotations

import dataclasses
from typing import Any

import onnx
import pytest
import torch
from onnx import helper

import torchtrt_ext.ops  # noqa: F401  (defines the built-in ops)
from tests.helpers import rel_err, run_onnx
from tests.ops.test_deform_conv2d import _case
from tests.ops.test_efficient_nms import random_case
from torchtrt_ext.ops import DOMAIN, get_op
from torchtrt_ext.ops.function import op_function
from torchtrt_ext.ops.spec import BakedAttributeError, onnx_elem_type
from torchtrt_ext.passes.functions import add_functions


@dataclasses.dataclass(frozen=True)
class Call:
    """One node of the op: its input tensors (float32, None for an absent optional input) and attributes."""

    inputs: dict[str, torch.Tensor | None]
    attrs: dict[str, Any]


def _dcn_call(**kw: Any) -> Call:
    case = _case(**kw)
    kh, kw_ = case["weight"].shape[2:]
    attrs = {k: case[k] for k in ("stride", "padding", "dilation", "groups")}
    attrs["offset_groups"] = case["offset"].shape[1] // (2 * kh * kw_)
    return Call({"input": case["x"], "offset": case["offset"], "weight": case["weight"], "bias": case["bias"],
                 "mask": case["mask"]}, attrs)


def _nms_call(seed: int, batch: int, anchors: int, classes: int, **attrs: Any) -> Call:
    boxes, scores = random_case(seed, batch, anchors, classes, box_coding=attrs.get("box_coding", 0),
                                raw_scores=bool(attrs.get("score_activation")))
    return Call({"boxes": boxes, "scores": scores}, attrs)


TWO_CALLS: dict[str, tuple[Call, Call]] = {
    "EfficientNMS_TRT": (_nms_call(1, 2, 40, 3, max_output_boxes=10),
                         _nms_call(2, 1, 30, 4, max_output_boxes=5, score_threshold=0.2, iou_threshold=0.3,
                                   class_agnostic=1, box_coding=1, score_activation=1, background_class=1)),
    "L2Norm": (Call({"x": torch.randn(2, 3, 4)}, {"axis": 1, "eps": 1e-6}),
               Call({"x": torch.randn(3, 5) * 1e-3}, {"axis": -1, "eps": 0.5})),
    "DeformConv2d": (_dcn_call(seed=1),
                     _dcn_call(n=1, c_in=4, c_out=6, h=7, w=9, k=(2, 3), stride=(2, 1), padding=(0, 2),
                               dilation=(1, 2), groups=2, offset_groups=2, seed=2)),
}


def two_node_model(op: str, calls: tuple[Call, ...], dtype: torch.dtype, opset: int = 18) -> onnx.ModelProto:
    """One graph holding one node per call, with the functions the exporter adds. Graph inputs ``<input>_<i>`` and
    outputs ``<output>_<i>`` are float32 (int32 where the op says), cast to and from ``dtype`` around the nodes (numpy
    has no bfloat16)."""
    spec = get_op(op).spec
    elem = onnx_elem_type(dtype)
    nodes, inputs, outputs = [], [], []
    for i, call in enumerate(calls):
        names = [f"{n}_{i}" if call.inputs.get(n) is not None else "" for n in spec.inputs]
        while names and not names[-1]:
            names.pop()
        nodes += [helper.make_node("Cast", [n], [f"{n}.cast"], to=elem) for n in names if n]
        fixed = spec.output_dtypes or (None,) * len(spec.outputs)
        outs = [f"{n}_{i}" if d else f"{n}_{i}.cast" for n, d in zip(spec.outputs, fixed)]
        nodes.append(spec.make_node([f"{n}.cast" if n else "" for n in names], outs, name=f"{op}_{i}", **call.attrs))
        nodes += [helper.make_node("Cast", [o], [o[:-len(".cast")]], to=onnx.TensorProto.FLOAT)
                  for o in outs if o.endswith(".cast")]
        inputs += [helper.make_tensor_value_info(f"{n}_{i}", onnx.TensorProto.FLOAT, list(t.shape))
                   for n, t in call.inputs.items() if t is not None]
        outputs += [helper.make_tensor_value_info(f"{n}_{i}", onnx_elem_type(d or torch.float32), list(ref.shape))
                    for n, d, ref in zip(spec.outputs, fixed, eager(op, call, torch.float32))]
    graph = helper.make_graph(nodes, op, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, 1)])
    assert add_functions(model) == {}
    return model


def eager(op: str, call: Call, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """The eager op's outputs for ``call`` with inputs in ``dtype``."""
    tensors = [t.to(dtype) if t is not None else None for t in call.inputs.values()]
    while tensors and tensors[-1] is None:
        tensors.pop()
    out = get_op(op)(*tensors, **call.attrs)
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("op", sorted(TWO_CALLS))
def test_the_function_is_stored_once_and_the_checker_accepts_it(op: str) -> None:
    model = two_node_model(op, TWO_CALLS[op], torch.float32)
    assert [(f.domain, f.name) for f in model.functions] == [(DOMAIN, get_op(op).spec.name)]
    custom = [n for n in model.graph.node if n.domain == DOMAIN]  # the nodes stay plugin nodes
    assert len(custom) == 2 and {a.name for a in custom[0].attribute} >= {"plugin_version", "plugin_namespace"}
    onnx.checker.check_model(model, full_check=True)
    refs = {a.ref_attr_name for n in model.functions[0].node for a in n.attribute if a.ref_attr_name}
    assert refs == {a.name for a in get_op(op).spec.attrs}  # every attribute reaches the body as a reference


@pytest.mark.parametrize(("op", "dtype"), [(op, d) for op in sorted(TWO_CALLS) for d in get_op(op).spec.dtypes])
def test_two_nodes_with_different_attributes_each_compute_their_op_on_onnxruntime(op: str, dtype: torch.dtype) -> None:
    calls = TWO_CALLS[op]
    model = two_node_model(op, calls, dtype)
    feeds = {f"{n}_{i}": t.to(dtype).float() for i, c in enumerate(calls) for n, t in c.inputs.items() if t is not None}
    got = run_onnx(model, feeds)
    tolerance = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}[dtype]
    spec = get_op(op).spec
    for i, call in enumerate(calls):
        refs = eager(op, call, dtype)
        outs = got[i * len(spec.outputs):(i + 1) * len(spec.outputs)]
        for out, expected in zip(outs, refs):
            assert out.shape == tuple(expected.shape)
            assert rel_err(torch.from_numpy(out).float(), expected.float()) < tolerance, (op, i)


def test_a_decomposition_that_bakes_an_attribute_in_gets_no_generic_body() -> None:
    spec = get_op("L2Norm").spec
    with pytest.raises(BakedAttributeError, match="'eps' is used as a Python value"):
        op_function(dataclasses.replace(spec, decompose=_baked_l2norm), 18)
    with pytest.raises(BakedAttributeError, match="'axis' is used as a Python value"):
        op_function(dataclasses.replace(spec, decompose=_branching_l2norm), 18)
    reducing = dataclasses.replace(spec, decompose=_reducing_l2norm)
    assert op_function(reducing, 18).node  # ReduceL2's axes: an input from opset 18, an attribute before
    with pytest.raises(BakedAttributeError, match="before opset 18"):
        op_function(reducing, 17)
    assert op_function(reducing, 17, attrs={"axis": 1, "eps": 0.5}).node  # one node's body is fine


def _baked_l2norm(d: Any, inputs: list[str], outputs: list[str], axis: Any, eps: Any) -> None:
    d.op("Div", inputs[0], d.const(max(eps, 1e-6)), out=outputs[0])


def _reducing_l2norm(d: Any, inputs: list[str], outputs: list[str], axis: Any, eps: Any) -> None:
    d.op("Div", inputs[0], d.reduce("ReduceL2", inputs[0], [axis]), out=outputs[0])


def _branching_l2norm(d: Any, inputs: list[str], outputs: list[str], axis: Any, eps: Any) -> None:
    d.op("Identity" if axis == 0 else "Neg", inputs[0], out=outputs[0])
