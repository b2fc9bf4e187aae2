"""decompose_custom_ops: the standard-op graph computes what the custom nodes did, with their attributes, and leaves
everything else as it was; a model without a default-domain opset gets a clear error naming the remedy."""
from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import torchtrt_ext.ops  # noqa: F401  (defines L2Norm)
from tests.helpers import run_onnx
from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError
from torchtrt_ext.ops import Attr, OpSpec, define_op
from torchtrt_ext.ops.spec import get_op
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


def _chain(opset: int, eps: float = 0.5, axis: int = 1) -> onnx.ModelProto:
    """x -> Relu -> L2Norm(axis, eps) -> Neg -> L2Norm(axis=-1) -> y, with a second opset import to keep."""
    spec = get_op("L2Norm").spec
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             spec.make_node(["r"], ["n"], name="first", axis=axis, eps=eps),
             helper.make_node("Neg", ["n"], ["m"], name="neg"),
             spec.make_node(["m"], ["y"], name="", axis=-1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [3, 4, 5])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [3, 4, 5])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("torchtrt_ext", 1),
                                                   helper.make_opsetid("com.example", 2)])


@pytest.mark.parametrize("opset", [17, 18])  # ReduceL2 axes: an attribute before 18, an input from 18
def test_the_decomposition_computes_the_op_with_its_attributes(opset: int) -> None:
    import torch

    original = _chain(opset)
    out = decompose_custom_ops(original)
    x = torch.randn(3, 4, 5)
    x[0, :, 0] = 1e-3  # norms below eps=0.5 along axis 1
    (got,) = run_onnx(out, {"x": x})
    expected = -torch.nn.functional.normalize(torch.relu(x).double(), dim=1, eps=0.5)
    expected = torch.nn.functional.normalize(expected, dim=-1, eps=1e-6)
    torch.testing.assert_close(torch.from_numpy(got).double(), expected, rtol=1e-5, atol=1e-6)
    # the other nodes stay, in order; the torchtrt_ext import goes, the others stay
    ops = [n.op_type for n in out.graph.node]
    assert ops[0] == "Relu" and "Neg" in ops and ops.index("Neg") > ops.index("CumSum")
    assert [n.name for n in out.graph.node if n.op_type in ("Relu", "Neg")] == ["relu", "neg"]
    assert {(e.domain, e.version) for e in out.opset_import} == {("", opset), ("com.example", 2)}
    names = [n.name for n in out.graph.node if n.op_type not in ("Relu", "Neg")]
    assert all(n.startswith("first") for n in names[:len(names) // 2]) and any(n.startswith("L2Norm_3") for n in names)
    assert len(set(names)) == len(names)
    assert original.graph.node[1].domain == "torchtrt_ext"  # the input model is left as it was


def test_bad_attributes_in_a_custom_node_are_refused() -> None:
    model = _chain(18)
    for attribute in model.graph.node[1].attribute:
        if attribute.name == "eps":
            attribute.f = -1.0
    with pytest.raises(InvalidAttributeError, match="eps=-1.0 is not allowed"):
        decompose_custom_ops(model)


def _if_model():
    """y = L2Norm(x) if cond else x, the custom node inside the If's then-branch (a subgraph)."""
    norm = get_op("L2Norm").spec.make_node(["x"], ["then_y"], name="inner_l2norm", axis=1, eps=1e-6)
    then_branch = helper.make_graph([norm], "then", [], [helper.make_tensor_value_info("then_y", T.FLOAT, [2, 3])])
    same = helper.make_node("Identity", ["x"], ["else_y"], name="keep")
    else_branch = helper.make_graph([same], "else", [], [helper.make_tensor_value_info("else_y", T.FLOAT, [2, 3])])
    branch = helper.make_node("If", ["cond"], ["y"], name="choose", then_branch=then_branch, else_branch=else_branch)
    graph = helper.make_graph([branch], "g", [helper.make_tensor_value_info("cond", T.BOOL, []),
                                              helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("torchtrt_ext", 1)])


def test_a_custom_node_inside_an_if_body_is_decomposed() -> None:
    import torch

    from tests.helpers import rel_err, run_onnx
    from torchtrt_ext.passes.onnx_util import all_nodes

    model = _if_model()
    out = decompose_custom_ops(model)
    assert [n.op_type for n in all_nodes(model) if n.domain == "torchtrt_ext"] == ["L2Norm"]
    assert [n for n in all_nodes(out) if n.domain not in ("", "ai.onnx")] == []
    x = torch.randn(2, 3)
    (taken,) = run_onnx(out, {"cond": torch.tensor(True), "x": x})
    (skipped,) = run_onnx(out, {"cond": torch.tensor(False), "x": x})
    assert rel_err(taken, torch.nn.functional.normalize(x, dim=1, eps=1e-6)) < 1e-6 and rel_err(skipped, x) == 0


def test_op_types_limits_what_is_decomposed() -> None:
    model = _model([("", 17), ("torchtrt_ext", 1)])
    assert decompose_custom_ops(model, op_types=["SomethingElse"]).graph.node == model.graph.node


def _shift_eager(x: "torch.Tensor", mode: str, offsets: tuple[int, ...]) -> "torch.Tensor":
    return x + sum(offsets) if mode == "add" else x - sum(offsets)


def _shift_decompose(d, inputs: list[str], outputs: list[str], mode: str, offsets: tuple[int, ...]) -> None:
    assert isinstance(mode, str) and isinstance(offsets, tuple)  # the kinds the OpSpec declares, as in eager
    d.op("Add" if mode == "add" else "Sub", inputs[0], d.op("CastLike", d.const(float(sum(offsets))), inputs[0]),
         out=outputs[0])


SHIFT_BY = define_op(OpSpec(
    name="TestShiftBy", inputs=("x",), outputs=("y",),
    attrs=(Attr("mode", "str", default="add", check=lambda v: v in ("add", "sub"), allowed="'add' or 'sub'"),
           Attr("offsets", "ints", default=(1,))),
    eager=_shift_eager, shape_rule=lambda shapes, dtypes, **_: [(shapes[0], dtypes[0])],
    decompose=_shift_decompose, doc="x + or - sum(offsets)"))


def test_string_and_list_attributes_reach_the_decomposition() -> None:
    """ONNX stores a string attribute as bytes and a list as a repeated field; the decomposition gets them back as
    the str and the tuple of ints the op declares (an op of this test: the library's own ops have neither)."""
    import torch

    node = SHIFT_BY.spec.make_node(["x"], ["y"], name="shift", mode="sub", offsets=[2, 3])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("torchtrt_ext", 1)])
    x = torch.randn(2, 3)
    (got,) = run_onnx(decompose_custom_ops(model), {"x": x})
    torch.testing.assert_close(torch.from_numpy(got), x - 5)
