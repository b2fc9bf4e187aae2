"""passes.functions: one function per op type however many nodes use it, dropped for ops a build runs as plugins, and
inlined into a node with the node's attributes (the rest of the behaviour is tested through the ops, the export, the
builder and the doctor)."""
from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

import torchtrt_ext.ops  # noqa: F401  (defines the built-in ops)
from torchtrt_ext.ops import DOMAIN, Decomposer, get_op
from torchtrt_ext.passes.functions import add_functions, inline_call, strip_functions


def _dcn_chain(count: int) -> onnx.ModelProto:
    """``count`` DeformConv2d nodes in a row (3x3, stride 1, padding 1: the shape is kept), sharing weight and
    offsets."""
    spec = get_op("DeformConv2d").spec
    nodes = [spec.make_node([f"x{i}", "offset", "weight", "bias", "mask"], [f"x{i + 1}"], name=f"dcn{i}",
                            padding=(1, 1)) for i in range(count)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, T.FLOAT, s) for n, s in (
        ("x0", [1, 4, 8, 8]), ("offset", [1, 18, 8, 8]), ("weight", [4, 4, 3, 3]), ("bias", [4]),
        ("mask", [1, 9, 8, 8]))], [helper.make_tensor_value_info(f"x{count}", T.FLOAT, [1, 4, 8, 8])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)])


def test_a_hundred_nodes_grow_the_file_by_one_body() -> None:
    growth, body = {}, 0
    for count in (1, 100):
        model = _dcn_chain(count)
        before = len(model.SerializeToString())
        assert add_functions(model) == {}
        assert [f.name for f in model.functions] == ["DeformConv2d"]
        growth[count] = len(model.SerializeToString()) - before
        body = len(model.functions[0].SerializeToString())
    assert growth[100] == growth[1] and body < growth[1] <= body + 8  # the body once, plus its field's framing


def test_nodes_that_pass_different_optional_inputs_get_no_function() -> None:
    model = _dcn_chain(2)
    del model.graph.node[1].input[3:]  # the second node without bias and mask
    missing = add_functions(model)
    assert list(missing) == ["DeformConv2d"] and "different optional inputs" in missing["DeformConv2d"]
    assert not model.functions


def test_strip_drops_only_the_named_ops_functions() -> None:
    model = _dcn_chain(1)
    add_functions(model)
    assert strip_functions(model, {"L2Norm"}) is model  # nothing to drop: the same model
    stripped = strip_functions(model, {"DeformConv2d"})
    assert not stripped.functions and model.functions  # a copy; the input keeps its function


@pytest.mark.parametrize("given", [{"axis": -1, "eps": 0.25}, {}])
def test_inlining_binds_the_nodes_attributes_or_the_defaults(given: dict) -> None:
    spec = get_op("L2Norm").spec
    model = helper.make_model(helper.make_graph([spec.make_node(["x"], ["y"], name="n", **given)], "g", [], []),
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)])
    add_functions(model)
    node = model.graph.node[0]
    if not given:  # a caller without the attributes: the function's defaults apply
        del node.attribute[:]
    nodes = inline_call(node, model.functions[0], "n")
    values = {a.name: helper.get_attribute_value(a) for n in nodes for a in n.attribute
              if n.op_type == "Constant" and a.name in ("value_int", "value_float")}
    assert values == {"value_int": given.get("axis", 1), "value_float": pytest.approx(given.get("eps", 1e-6))}
    assert all(n.name.startswith("n/") for n in nodes) and nodes[0].input == ["x"] and nodes[-1].output == ["y"]
    assert not [a for n in nodes for a in n.attribute if a.ref_attr_name]


def _scale_by_eager(x, factor: float, mode: str):  # type: ignore[no-untyped-def]
    return x * factor if mode == "mul" else x / factor


def _scale_by_decompose(d: Decomposer, inputs: list[str], outputs: list[str], factor: float, mode: str) -> None:
    # bakes ``mode`` in: a Python branch on the attribute's value
    d.op("Mul" if mode == "mul" else "Div", inputs[0], d.op("CastLike", d.const(factor), inputs[0]), out=outputs[0])


def test_an_op_whose_decomposition_bakes_an_attribute_in_gets_no_function_and_still_decomposes(
        caplog: pytest.LogCaptureFixture) -> None:
    import torch

    from tests.helpers import run_onnx
    from torchtrt_ext.doctor import report
    from torchtrt_ext.ops import Attr, OpSpec, define_op
    from torchtrt_ext.passes import decompose_custom_ops

    op = define_op(OpSpec(
        name="TestScaleBy", inputs=("x",), outputs=("y",),
        attrs=(Attr("factor", "float", default=2.0), Attr("mode", "str", default="mul")),
        eager=_scale_by_eager, shape_rule=lambda shapes, dtypes, **_: [(shapes[0], dtypes[0])],
        decompose=_scale_by_decompose))
    nodes = [op.spec.make_node(["x"], ["a"], name="mul3", factor=3.0, mode="mul"),
             op.spec.make_node(["a"], ["y"], name="div4", factor=4.0, mode="div")]
    model = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                                                [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])]),
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)])
    missing = add_functions(model)
    assert not model.functions and "'mode' is used as a Python value" in missing["TestScaleBy"]
    assert "no ONNX function for TestScaleBy" in caplog.text
    found = [(f.op_type, f.status) for f in report(model, checker="table").findings if f.node.endswith("function>")]
    assert found == [("TestScaleBy", "no function")]
    x = torch.randn(2, 3)
    (y,) = run_onnx(decompose_custom_ops(model), {"x": x})  # each node with its own values
    torch.testing.assert_close(torch.from_numpy(y), x * 3.0 / 4.0)
