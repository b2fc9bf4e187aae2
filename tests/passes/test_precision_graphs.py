"""apply_precision on hand-built ONNX graphs: which node computes in which type, what the graph's interface keeps, what
happens to constants, and that the typed graph computes what the FP32 one did (onnxruntime). Fast: no exporter."""
from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import torchtrt_ext.ops  # noqa: F401  (defines L2Norm)
from torchtrt_ext.errors import InvalidInputError
from torchtrt_ext.ops.spec import get_op
from torchtrt_ext.passes.precision import apply_precision

ort = pytest.importorskip("onnxruntime")
F32, F16, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16
LOW = {"fp16": F16, "bf16": BF16}


def graph_model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto] = (), *, opset: int | None = 18,
                inputs: tuple = (("x", F32, ["N", 4]),), outputs: tuple = (("y", F32, ["N", 4]),)) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(inits))
    opsets = [helper.make_opsetid("", opset)] if opset else []
    if any(n.domain == "torchtrt_ext" for n in nodes):
        opsets.append(helper.make_opsetid("torchtrt_ext", 1))
    built = helper.make_model(graph, opset_imports=opsets)
    built.ir_version = 9
    return built


def types_of(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every tensor, after ONNX shape inference (which checks the types fit together)."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    g = inferred.graph
    found = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]}
    found.update({i.name: i.data_type for i in g.initializer})
    return found


def compute_type(model: onnx.ModelProto, op_type: str) -> int:
    """The type the (first) node of ``op_type`` computes in: its first input's."""
    node = next(n for n in model.graph.node if n.op_type == op_type)
    return types_of(model)[node.input[0]]


def run(model: onnx.ModelProto, **feeds: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def weights(name: str, value: object, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def relu_sum() -> onnx.ModelProto:
    """y = ReduceSum(Relu(x * w), axis 1, keepdims) + Sqrt(Abs(x)): two elementwise ops, a reduction, a root."""
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"], name="scale"), helper.make_node("Relu", ["xw"], ["r"], name="relu"),
             helper.make_node("ReduceSum", ["r", "axes"], ["s"], keepdims=1, name="sum"),
             helper.make_node("Abs", ["x"], ["a"], name="abs"), helper.make_node("Sqrt", ["a"], ["q"], name="root"),
             helper.make_node("Add", ["s", "q"], ["y"], name="add")]
    return graph_model(nodes, [weights("w", [0.5, -1.0, 2.0, 3.0]), weights("axes", [1], np.int64)])


# ------------------------------------------------------------------------------------------------ what runs where
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_low_precision_runs_elementwise_ops_low_and_sensitive_ops_in_fp32(precision: str) -> None:
    original = relu_sum()
    result = apply_precision(original, precision)
    typed = result.model
    onnx.checker.check_model(typed, full_check=True)
    assert compute_type(typed, "Relu") == compute_type(typed, "Abs") == LOW[precision]
    assert compute_type(typed, "ReduceSum") == compute_type(typed, "Sqrt") == F32
    assert types_of(typed)["x"] == types_of(typed)["y"] == F32  # the interface is as exported
    assert sorted(result.fp32_nodes) == ["root", "sum"] and result.precision == precision
    casts = [n for n in typed.graph.node if n.op_type == "Cast"]
    assert result.casts_added == len(casts) > 0
    names = [n.name for n in typed.graph.node]
    assert all(names) and len(set(names)) == len(names)  # added nodes are named too (TensorRT's layer names)
    (last,) = [n for n in typed.graph.node if "y" in n.output]
    assert (last.op_type, last.name, last.input[0]) == ("Cast", "y_output_cast", f"y__{precision}")
    if precision == "fp16":  # onnxruntime's CPU provider has no bfloat16 Mul
        x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
        (want,), (got,) = run(original, x=x), run(typed, x=x)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-2)


def test_fp32_and_as_exported_on_an_fp32_graph() -> None:
    original = relu_sum()
    untouched = apply_precision(original, "as_exported")
    assert untouched.model is original
    assert (untouched.precision, untouched.fp32_nodes, untouched.casts_added) == ("as_exported", [], 0)
    result = apply_precision(original, "fp32")
    assert result.casts_added == 0 and result.fp32_nodes == []
    assert [n.op_type for n in result.model.graph.node] == [n.op_type for n in original.graph.node]
    assert {t.name: t.data_type for t in result.model.graph.initializer} == {"w": F32, "axes": TensorProto.INT64}


def test_fp32_on_an_fp16_graph_computes_in_fp32_behind_an_fp16_interface() -> None:
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"]), helper.make_node("Relu", ["xw"], ["y"])]
    original = graph_model(nodes, [weights("w", [0.5, -1.0, 2.0, 3.0], np.float16)], inputs=(("x", F16, ["N", 4]),),
                           outputs=(("y", F16, ["N", 4]),))
    typed = apply_precision(original, "fp32").model
    assert compute_type(typed, "Relu") == compute_type(typed, "Mul") == F32
    assert types_of(typed)["x"] == types_of(typed)["y"] == F16
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float16)
    np.testing.assert_allclose(run(typed, x=x)[0], run(original, x=x)[0], rtol=1e-3)


def test_an_unknown_precision_names_the_choices() -> None:
    with pytest.raises(InvalidInputError, match=r"precision='int8' is not supported.*fp32.*fp16.*bf16.*Remedy"):
        apply_precision(relu_sum(), "int8")


# ------------------------------------------------------------------------------------------------ the interface
def test_an_output_also_read_by_another_node_is_cast_back_once() -> None:
    """y is a graph output and the input of another node: the producer writes a renamed low tensor, the consumer
    reads that, and one Cast writes y in its declared type."""
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["y"], ["z"])]
    original = graph_model(nodes, outputs=(("y", F32, ["N", 4]), ("z", F32, ["N", 4])))
    result = apply_precision(original, "fp16")
    typed = result.model
    types = types_of(typed)
    assert types["y"] == types["z"] == F32 and compute_type(typed, "Neg") == F16
    producers = [n for n in typed.graph.node if "y" in n.output]
    assert [n.op_type for n in producers] == ["Cast"] and result.casts_added == 3  # x down, y and z back up
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    for want, got in zip(run(original, x=x), run(typed, x=x)):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


def test_integer_inputs_and_shape_tensors_keep_their_types() -> None:
    """Shape, the Reshape target and Gather indices are not data: they keep int64; a node with no float input (Shape)
    is left alone."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["shape"]),
             helper.make_node("Reshape", ["r", "shape"], ["rs"]), helper.make_node("Gather", ["rs", "idx"], ["g"], axis=1),
             helper.make_node("Neg", ["g"], ["y"])]
    original = graph_model(nodes, [weights("idx", [3, 2, 1, 0], np.int64)])
    typed = apply_precision(original, "fp16").model
    types = types_of(typed)
    assert types["shape"] == types["idx"] == TensorProto.INT64
    assert compute_type(typed, "Gather") == compute_type(typed, "Reshape") == F16
    x = np.random.default_rng(3).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(run(typed, x=x)[0], run(original, x=x)[0], rtol=1e-3, atol=1e-3)


def test_resize_scales_stay_fp32() -> None:
    """Resize's scales are float but not data (another type variable): they keep FP32 while X goes low."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Resize", ["r", "", "scales"], ["y"], mode="nearest")]
    original = graph_model(nodes, [weights("scales", [1.0, 2.0])], outputs=(("y", F32, ["N", 8]),))
    typed = apply_precision(original, "fp16").model
    assert types_of(typed)["scales"] == F32 and compute_type(typed, "Resize") == F16
    computed = [helper.make_node("Abs", ["scales0"], ["scales"]), *nodes]  # scales computed by an op that goes low
    original = graph_model(computed, [weights("scales0", [1.0, 2.0])], outputs=(("y", F32, ["N", 8]),))
    typed = apply_precision(original, "fp16").model
    resize = next(n for n in typed.graph.node if n.op_type == "Resize")
    assert compute_type(typed, "Abs") == F16 and types_of(typed)[resize.input[2]] == F32  # cast back for Resize
    x = np.random.default_rng(4).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(run(typed, x=x)[0], run(original, x=x)[0], rtol=1e-3, atol=1e-3)


def test_an_op_without_the_low_type_at_this_opset_stays_fp32() -> None:
    """Conv has no bfloat16 before opset 22: it stays FP32 there (a valid graph), and goes bf16 from opset 22."""
    conv = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Conv", ["r", "k"], ["y"])]
    kernel = [weights("k", np.ones((1, 1, 1, 1)))]
    shapes = dict(inputs=(("x", F32, [1, 1, 3, 3]),), outputs=(("y", F32, [1, 1, 3, 3]),))
    at_18 = apply_precision(graph_model(conv, kernel, **shapes), "bf16").model
    assert compute_type(at_18, "Conv") == F32 and compute_type(at_18, "Relu") == BF16
    at_22 = apply_precision(graph_model(conv, kernel, opset=22, **shapes), "bf16").model
    assert compute_type(at_22, "Conv") == BF16
    no_opset = graph_model(conv, kernel, opset=None, **shapes)  # looked up at opset 17
    assert apply_precision(no_opset, "fp16").model.graph.node  # no error


# ------------------------------------------------------------------------------------------------ opaque nodes
def test_custom_nodes_and_subgraphs_get_their_exported_types() -> None:
    """A torchtrt_ext node (FP32 math inside) and an If are opaque: their inputs are cast back to the exported types
    and they are reported as kept in FP32; Cast nodes keep theirs too."""
    spec = get_op("L2Norm").spec
    branch = lambda name: helper.make_graph([helper.make_node("Identity", ["x"], [name])], name, [],  # noqa: E731
                                            [helper.make_tensor_value_info(name, F32, ["N", 4])])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"), spec.make_node(["r"], ["n"], name="norm", axis=1),
             helper.make_node("If", ["flag"], ["i"], name="choose", then_branch=branch("a"), else_branch=branch("b")),
             helper.make_node("Cast", ["i"], ["c"], name="cast", to=F32), helper.make_node("Neg", ["c"], ["y"], name="neg")]
    original = graph_model(nodes, inputs=(("x", F32, ["N", 4]), ("flag", TensorProto.BOOL, [])),
                           outputs=(("y", F32, ["N", 4]), ("n", F32, ["N", 4])))
    result = apply_precision(original, "fp16")
    typed = result.model
    by_name = {n.name: n for n in typed.graph.node}
    inferred = types_of(typed)
    assert inferred[by_name["norm"].input[0]] == F32  # cast back from the FP16 Relu
    assert inferred[by_name["cast"].input[0]] == F32 and compute_type(typed, "Relu") == F16
    assert {"norm", "choose"} <= set(result.fp32_nodes) and "cast" not in result.fp32_nodes
    assert compute_type(typed, "Neg") == F16  # what reads an opaque node's output computes low again


# ------------------------------------------------------------------------------------------------ constants
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_float_initializers_are_converted_not_cast(precision: str, caplog: pytest.LogCaptureFixture) -> None:
    """Weights feeding low nodes are stored in the low type (no run-time Cast); a tiny non-zero value stays non-zero
    in FP16; the FP32 originals no one reads are gone. (Values beyond FP16's range are not clipped: their node
    computes in FP32, tests/passes/test_precision_large_constants.py.)"""
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"]), helper.make_node("Max", ["xw", "eps"], ["m"]),
             helper.make_node("Constant", [], ["b"], value=weights("b_value", [1.0, 2.0, 3.0, 4.0])),
             helper.make_node("Add", ["m", "b"], ["y"])]
    original = graph_model(nodes, [weights("w", [6e4, -2.0, 0.0, -3e4]), weights("eps", 1e-12)])
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        result = apply_precision(original, precision)
    typed = result.model
    stored = {t.name: numpy_helper.to_array(t) for t in typed.graph.initializer}
    assert {t.data_type for t in typed.graph.initializer} == {LOW[precision]}
    assert not any(n.op_type == "Cast" and n.input[0] in ("w", "eps", "b") for n in typed.graph.node)
    assert "w" not in stored and "eps" not in stored  # replaced, not kept beside
    (w,) = [v for k, v in stored.items() if k.startswith("w")]
    (eps,) = [v for k, v in stored.items() if k.startswith("eps")]
    (b,) = [v for k, v in stored.items() if k.startswith("b")]
    assert eps > 0 and list(b.astype(np.float32)) == [1.0, 2.0, 3.0, 4.0]
    assert float(w.astype(np.float32)[0]) == pytest.approx(6e4, rel=1e-2) and "range" not in caplog.text
    if precision == "fp16":
        assert float(eps) == 2.0 ** -24  # the smallest FP16 subnormal, not 0
    assert list(w.astype(np.float32)[1:3]) == [-2.0, 0.0]  # an exact zero stays zero


def test_the_largest_float16_is_not_clipped(caplog: pytest.LogCaptureFixture) -> None:
    nodes = [helper.make_node("Mul", ["x", "w"], ["y"])]
    limit = float(np.finfo(np.float16).max)
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        typed = apply_precision(graph_model(nodes, [weights("w", [limit, -limit, 1.0, 2.0])]), "fp16").model
    assert "clipped" not in caplog.text
    (w,) = [numpy_helper.to_array(t) for t in typed.graph.initializer]
    assert list(w.astype(np.float32)) == [limit, -limit, 1.0, 2.0]


def test_constant_of_shape_is_computed_not_folded() -> None:
    """ConstantOfShape also has a 'value' tensor attribute, but its output is a tensor of a run-time shape: it is cast,
    not replaced by its one-element value."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("ConstantOfShape", ["shape"], ["twos"], value=weights("two", [2.0])),
             helper.make_node("Relu", ["twos"], ["y"])]  # y has x's shape only if "twos" does
    original = graph_model(nodes)
    typed = apply_precision(original, "fp16").model
    x = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    (got,) = run(typed, x=x)
    assert got.shape == (3, 4) and (got == 2.0).all()


def test_a_float_graph_input_feeding_several_nodes_is_cast_once() -> None:
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("Add", ["r", "n"], ["y"])]
    result = apply_precision(graph_model(nodes), "fp16")
    casts = [n for n in result.model.graph.node if n.op_type == "Cast"]
    assert [c.input[0] for c in casts].count("x") == 1 and result.casts_added == 2  # x down once, y back up
