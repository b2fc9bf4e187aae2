"""Spot non-maximum suppression written the way static engines run badly or not at all, for the doctor.

Two shapes of it are recognised:

* ``loop``: an ONNX ``Loop`` (or ``If``) whose body computes box overlaps (``Min``/``Max``, ``Div`` and a comparison):
  a Python NMS loop kept by the TorchScript exporter;
* ``dynamic``: a bare ``NonMaxSuppression`` whose ``selected_indices`` (a data-dependent ``[N, 3]``) feed ``Gather``
  indices, so the detections have a data-dependent size. A result scattered into a fixed-size tensor (``ScatterND``,
  as ``ops.efficient_nms``'s decomposition does) is not reported.

The remedy for both is ``torchtrt_ext.ops.efficient_nms``: one ``EfficientNMS_TRT`` node with fixed-size outputs.
"""
from __future__ import annotations

import collections
import dataclasses

import onnx

from torchtrt_ext.passes.onnx_util import subgraphs, walk_graphs

REMEDY = ("replace the NMS with torchtrt_ext.ops.efficient_nms(boxes, scores, ...) at export: one EfficientNMS_TRT "
          "node with fixed-size outputs (num_detections, boxes, scores, classes), served by TensorRT's own plugin on "
          "full TensorRT and by ours on TensorRT-RTX")
_IOU_OPS = ({"Min", "Max"}, {"Div"}, {"Greater", "GreaterOrEqual", "Less", "LessOrEqual"})
_PASS_THROUGH = {"Slice", "Gather", "Squeeze", "Unsqueeze", "Cast", "Split", "Transpose", "Reshape", "Flatten",
                 "Identity", "Concat"}
_GATHERS = {"Gather", "GatherND", "GatherElements"}


@dataclasses.dataclass(frozen=True)
class NmsPattern:
    """One NMS the doctor reports: the node, its op type, ``kind`` ("loop" or "dynamic") and what was seen."""

    node: str
    op_type: str
    kind: str
    detail: str


def _body_op_types(node: onnx.NodeProto) -> set[str]:
    return {n.op_type for sub in subgraphs(node) for graph in walk_graphs(sub) for n in graph.node}


def _gathers_by_selected(graph: onnx.GraphProto, nms: onnx.NodeProto) -> tuple[list[onnx.NodeProto], bool]:
    """The gathers whose indices derive from ``nms``'s output within ``graph``, and whether a ScatterND takes it."""
    consumers = collections.defaultdict(list)
    for node in graph.node:
        for index, name in enumerate(node.input):
            consumers[name].append((node, index))
    tainted, todo, gathers, scattered = set(nms.output[:1]), list(nms.output[:1]), [], False
    while todo:
        for node, index in consumers[todo.pop()]:
            if node.op_type == "ScatterND":
                scattered = True
            elif node.op_type in _GATHERS and index == 1:
                gathers.append(node)
            elif node.op_type in _PASS_THROUGH:
                fresh = [o for o in node.output if o and o not in tainted]
                tainted.update(fresh)
                todo.extend(fresh)
    return gathers, scattered


def find_nms_patterns(model: onnx.ModelProto) -> list[NmsPattern]:
    """Every loop-written or dynamic-size NMS in ``model`` (main graph and subgraphs), in graph order."""
    found = []
    for graph in walk_graphs(model.graph):
        for node in graph.node:
            name = node.name or f"<unnamed {node.op_type}>"
            if node.op_type in ("Loop", "If"):
                body = _body_op_types(node)
                if all(body & group for group in _IOU_OPS):
                    found.append(NmsPattern(name, node.op_type, "loop",
                                            f"an ONNX {node.op_type} whose body computes box overlaps ("
                                            f"{', '.join(sorted(body & set().union(*_IOU_OPS)))}): an NMS loop, "
                                            "which TensorRT runs slowly and TensorRT-RTX cannot build"))
            elif node.op_type == "NonMaxSuppression":
                gathers, scattered = _gathers_by_selected(graph, node)
                if gathers and not scattered:
                    found.append(NmsPattern(name, node.op_type, "dynamic",
                                            f"NonMaxSuppression followed by gathers of data-dependent size "
                                            f"({', '.join(g.name or g.op_type for g in gathers[:3])}): the detections "
                                            "have no fixed shape, and TensorRT-RTX has no NMS implementation"))
    return found
