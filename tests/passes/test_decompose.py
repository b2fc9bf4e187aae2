"""decompose_custom_ops on a model without a default-domain opset: a clear error naming the remedy."""
from __future__ import annotations

import pytest
from onnx import TensorProto as T
from onnx import helper

import torchtrt_ext.ops  # noqa: F401  (defines L2Norm)
from torchtrt_ext.errors import InvalidInputError
from torchtrt_ext.ops._spec import get_op
from torchtrt_ext.passes import decompose_custom_ops
from torchtrt_ext.passes.onnx_util import default_opset


def _model(opsets: list[tuple[str, int]]):
    node = get_op("L2Norm").spec.make_node(["x"], ["y"], name="l2norm", axis=1, eps=1e-6)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def test_default_opset_reads_the_default_domain_only() -> None:
    assert default_opset(_model([("torchtrt_ext", 1), ("", 18)])) == 18
    assert default_opset(_model([("torchtrt_ext", 1)])) is None


def test_decompose_without_default_opset_names_the_remedy() -> None:
    with pytest.raises(InvalidInputError, match="imports no opset of the default ONNX domain.*make_opsetid"):
        decompose_custom_ops(_model([("torchtrt_ext", 1)]))


def test_decompose_replaces_the_custom_node() -> None:
    out = decompose_custom_ops(_model([("", 17), ("torchtrt_ext", 1)]))
    assert out.graph.node and all(n.domain in ("", "ai.onnx") for n in out.graph.node)
