"""fuse_l2norm on hand-built ONNX graphs: every attribute the pattern depends on, one at a time.

The exporter tests (test_fuse_l2norm.py) show that real exports fuse; these show that each condition of the pattern
matters: change one attribute (axes, keepdims, the clamp's bounds, the numerator, the root, the dtype, an extra
consumer) and the fusion must follow. Fused graphs are checked against the original on onnxruntime.
"""
from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from torchtrt_ext.passes.decompose import decompose_custom_ops
from torchtrt_ext.passes.fuse_l2norm import NO_CLAMP_EPS, fuse_l2norm_with_report

ort = pytest.importorskip("onnxruntime")
F32, F16, F64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE


def const(name: str, value: object, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def model(nodes: list[onnx.NodeProto], *, inits: tuple[onnx.TensorProto, ...] = (), elem: int = F32,
          shape: tuple = ("N", 6, 5), outputs: tuple[str, ...] = ("y",), inputs: tuple = ()) -> onnx.ModelProto:
    """A graph reading ``x`` (``elem``, ``shape``) and writing ``outputs``; opset 18 (axes as inputs)."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", elem, shape), *inputs],
        [helper.make_tensor_value_info(o, elem, shape if o == "y" or shape is None else [f"{o}{i}" for i in range(len(shape))])
         for o in outputs], list(inits))
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    built.ir_version = 9
    return built


def reduce_l2(axes: list[int], keepdims: int = 1, out: str = "n", **attrs: object) -> tuple:
    return (helper.make_node("ReduceL2", ["x", "axes"], [out], keepdims=keepdims, **attrs),
            const("axes", axes, np.int64))


def normalize(clamp: list[onnx.NodeProto] | None = None, *, axes: list[int] = [1], keepdims: int = 1,
              inits: tuple = (), numerator: str = "x", **kwargs: object) -> onnx.ModelProto:
    """x / clamp(ReduceL2(x, axes)) with the given clamp nodes (reading "n", writing "c")."""
    reduce, axes_init = reduce_l2(axes, keepdims)
    nodes = [reduce, *(clamp or []), helper.make_node("Div", [numerator, "c" if clamp else "n"], ["y"])]
    return model(nodes, inits=(axes_init, *inits), **kwargs)


def fused(original: onnx.ModelProto) -> tuple[float, int]:
    """(eps, axis) of the single L2Norm the graph fuses to, after checking the numbers on onnxruntime."""
    out, report = fuse_l2norm_with_report(original)
    assert [n.op_type for n in out.graph.node] == ["L2Norm"], (report.summary(), [n.op_type for n in out.graph.node])
    onnx.checker.check_model(out)
    x = np.random.default_rng(0).standard_normal((3, 6, 5)).astype(np.float32)
    x[0, :, 0] = 1e-3  # a small vector: a clamp with a large eps shows in the numbers
    for want, got in zip(_run(original, x), _run(decompose_custom_ops(out), x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    attrs = {a.name: helper.get_attribute_value(a) for a in out.graph.node[0].attribute}
    assert len(report.fused) == 1 and report.fused[0].eps == pytest.approx(attrs["eps"])
    return float(attrs["eps"]), int(attrs["axis"])


def unfused(original: onnx.ModelProto) -> str:
    """The near-miss reasons (joined; "" when no near miss was reported), after checking nothing changed."""
    out, report = fuse_l2norm_with_report(original)
    assert not report.fused and out.SerializeToString() == original.SerializeToString()
    return "; ".join(r for u in report.unfused for r in u.reasons)


def _run(m: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x.astype(np.float16) if m.graph.input[0].type.tensor_type.elem_type == F16
                              else x})


# ------------------------------------------------------------------------------------------------ the reduction
@pytest.mark.parametrize("axes, axis", [([1], 1), ([2], 2), ([-1], 2), ([-2], 1), ([0], 0)])
def test_the_reduced_axis_becomes_the_attribute(axes: list[int], axis: int) -> None:
    assert fused(normalize(axes=axes)) == (NO_CLAMP_EPS, axis)


def test_the_axis_of_an_unknown_rank_stays_as_given() -> None:
    out, report = fuse_l2norm_with_report(normalize(axes=[-1], shape=None))
    assert report.fused and report.fused[0].axis == -1


@pytest.mark.parametrize("axes, keepdims, reason", [
    ([1, 2], 1, "reduces over 2 axes [1, 2], not one"),
    ([1, 1], 1, None),
    ([1], 0, "drops the reduced axis (keepdims=0)"),
    ([], 1, "reduces over all axes, not one"),
])
def test_only_one_axis_kept_in_place_fuses(axes: list[int], keepdims: int, reason: str | None) -> None:
    if reason is None:
        assert fused(normalize(axes=axes)) == (NO_CLAMP_EPS, 1)  # the same axis twice is one axis
    else:
        assert reason in unfused(normalize(axes=axes, keepdims=keepdims))


def test_a_reduction_over_no_axes_or_run_time_axes_stays() -> None:
    noop = model([helper.make_node("ReduceL2", ["x"], ["n"], keepdims=1, noop_with_empty_axes=1),
                  helper.make_node("Div", ["x", "n"], ["y"])])
    assert "reduces nothing (noop_with_empty_axes)" in unfused(noop)
    runtime = model([helper.make_node("ReduceL2", ["x", "ax"], ["n"], keepdims=1),
                     helper.make_node("Div", ["x", "n"], ["y"])],
                    inputs=(helper.make_tensor_value_info("ax", TensorProto.INT64, [1]),))
    assert "reduces over axes computed at run time" in unfused(runtime)
    legacy_attr = model([helper.make_node("ReduceL2", ["x"], ["n"], keepdims=1, axes=[2]),
                         helper.make_node("Div", ["x", "n"], ["y"])])
    legacy_attr.opset_import[0].version = 17  # axes as an attribute (opset < 18)
    assert fuse_l2norm_with_report(legacy_attr)[1].fused[0].axis == 2


def test_p_other_than_2_never_starts_a_match() -> None:
    reduce, axes_init = reduce_l2([1])
    l1 = model([helper.make_node("ReduceL1", ["x", "axes"], ["n"], keepdims=1),
                helper.make_node("Div", ["x", "n"], ["y"])], inits=(axes_init,))
    assert unfused(l1) == ""


# ------------------------------------------------------------------------------------------------ the clamp
@pytest.mark.parametrize("op, inputs", [("Clip", ["n", "lo"]), ("Clip", ["n", "lo", "hi_inf"]), ("Max", ["n", "lo"]),
                                        ("Max", ["lo", "n"])])
def test_a_lower_clamp_of_the_norm_becomes_eps(op: str, inputs: list[str]) -> None:
    graph = normalize([helper.make_node(op, inputs, ["c"])], inits=(const("lo", 0.5), const("hi_inf", np.inf)))
    assert fused(graph) == (pytest.approx(0.5), 1)


def test_a_clamp_from_above_or_of_another_tensor_stays() -> None:
    above = normalize([helper.make_node("Clip", ["n", "lo", "hi"], ["c"])], inits=(const("lo", 0.5), const("hi", 10.0)))
    assert "also clamps from above" in unfused(above)
    clip_without_min = normalize([helper.make_node("Clip", ["n"], ["c"])])
    assert unfused(clip_without_min) == ""
    runtime_min = normalize([helper.make_node("Clip", ["n", "lo"], ["c"])],
                            inputs=(helper.make_tensor_value_info("lo", F32, []),))
    assert unfused(runtime_min) == ""


# ------------------------------------------------------------------------------------------------ the division
def test_the_numerator_must_be_the_reduced_tensor() -> None:
    other = normalize(numerator="z", inputs=(helper.make_tensor_value_info("z", F32, ("N", 6, 5)),))
    assert "normalizes 'z', not the reduced tensor 'x'" in unfused(other)
    swapped = normalize()
    swapped.graph.node[1].input[:] = ["n", "x"]  # norm / x
    assert unfused(swapped) == ""


@pytest.mark.parametrize("extra, reason", [
    ("output", "'n' is also a graph output"),
    ("consumer", "'n' is also used by Neg"),
])
def test_an_intermediate_used_elsewhere_stays(extra: str, reason: str) -> None:
    if extra == "output":
        graph = normalize(outputs=("y", "n"))
    else:
        reduce, axes_init = reduce_l2([1])
        graph = model([reduce, helper.make_node("Div", ["x", "n"], ["y"]), helper.make_node("Neg", ["n"], ["z"])],
                      inits=(axes_init,), outputs=("y", "z"))
    assert reason in unfused(graph)


@pytest.mark.parametrize("elem, shape, reason", [(F64, ("N", 6, 5), "'x' is float64; L2Norm takes float32, float16, bfloat16"), (F32, (6,), "has rank 1")])
def test_inputs_l2norm_does_not_take_stay(elem: int, shape: tuple, reason: str) -> None:
    assert reason in unfused(normalize(axes=[0], elem=elem, shape=shape))


# ------------------------------------------------------------------------------------------------ sum of squares
def _squares(square: str) -> tuple[list[onnx.NodeProto], tuple]:
    if square == "mul":
        return [helper.make_node("Mul", ["x", "x"], ["sq"])], ()
    return [helper.make_node("Pow", ["x", "two"], ["sq"])], (const("two", 2.0),)


@pytest.mark.parametrize("square", ["mul", "pow"])
@pytest.mark.parametrize("tail", ["div", "reciprocal", "one_over"])
def test_root_of_the_sum_of_squares_fuses(square: str, tail: str) -> None:
    nodes, inits = _squares(square)
    nodes += [helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=1), helper.make_node("Sqrt", ["s"], ["n"])]
    if tail == "div":
        nodes.append(helper.make_node("Div", ["x", "n"], ["y"]))
    else:
        first = (helper.make_node("Reciprocal", ["n"], ["r"]) if tail == "reciprocal"
                 else helper.make_node("Div", ["one", "n"], ["r"]))
        nodes += [first, helper.make_node("Mul", ["r", "x"], ["y"])]
    graph = model(nodes, inits=(*inits, const("axes", [1], np.int64), const("one", 1.0)))
    assert fused(graph) == (NO_CLAMP_EPS, 1)


def test_the_sum_of_squares_variants() -> None:
    def build(middle: list[onnx.NodeProto], square: str = "mul", extra: tuple = ()) -> onnx.ModelProto:
        nodes, inits = _squares(square)
        nodes += [helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=1), *middle,
                  helper.make_node("Div", ["x", "n"], ["y"])]
        return model(nodes, inits=(*inits, const("axes", [1], np.int64), *extra))

    clamp = [helper.make_node("Clip", ["s", "e2"], ["sc"]), helper.make_node("Sqrt", ["sc"], ["n"])]
    assert fused(build(clamp, extra=(const("e2", 0.25),))) == (pytest.approx(0.5), 1)  # eps = sqrt(e*e)
    plus_zero = [helper.make_node("Add", ["s", "zero"], ["sz"]), helper.make_node("Sqrt", ["sz"], ["n"])]
    assert fused(build(plus_zero, extra=(const("zero", 0.0),))) == (NO_CLAMP_EPS, 1)
    plus_eps = [helper.make_node("Add", ["s", "e"], ["sz"]), helper.make_node("Sqrt", ["sz"], ["n"])]
    assert "eps=1e-06 is added inside the square root" in unfused(build(plus_eps, extra=(const("e", 1e-6),)))
    cube, cube_inits = [helper.make_node("Pow", ["x", "three"], ["sq"])], (const("three", 3.0),)
    no_match = model([*cube, helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=1),
                      helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Div", ["x", "n"], ["y"])],
                     inits=(*cube_inits, const("axes", [1], np.int64)))
    assert unfused(no_match) == ""


def test_reduce_sum_square_and_float_casts_around_the_reduction() -> None:
    nodes = [helper.make_node("ReduceSumSquare", ["x", "axes"], ["s"], keepdims=1),
             helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Div", ["x", "n"], ["y"])]
    assert fused(model(nodes, inits=(const("axes", [2], np.int64),))) == (NO_CLAMP_EPS, 2)
    # the dynamo exporter's FP16 spelling: squares cast up to FP32 for the sum, the root cast back down
    half = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Cast", ["sq"], ["sq32"], to=F32),
            helper.make_node("ReduceSum", ["sq32", "axes"], ["s"], keepdims=1), helper.make_node("Sqrt", ["s"], ["n32"]),
            helper.make_node("Cast", ["n32"], ["n"], to=F16), helper.make_node("Div", ["x", "n"], ["y"])]
    original = model(half, inits=(const("axes", [1], np.int64),), elem=F16)
    out, report = fuse_l2norm_with_report(original)
    assert [n.op_type for n in out.graph.node] == ["L2Norm"], report.summary()
    x = np.random.default_rng(1).standard_normal((3, 6, 5))
    np.testing.assert_allclose(_run(decompose_custom_ops(out), x)[0], _run(original, x)[0], rtol=2e-3, atol=1e-3)
    both_cast = [*half[:-1], helper.make_node("Add", ["sq32", "sq32"], ["twice"]), half[-1]]
    assert "'sq32' has other uses" in unfused(model(both_cast, inits=(const("axes", [1], np.int64),), elem=F16,
                                                    outputs=("y", "twice")))
    to_int = [helper.make_node("ReduceSumSquare", ["x", "axes"], ["s"], keepdims=1),
              helper.make_node("Cast", ["s"], ["si"], to=TensorProto.INT32), helper.make_node("Sqrt", ["si"], ["n"]),
              helper.make_node("Div", ["x", "n"], ["y"])]
    assert unfused(model(to_int, inits=(const("axes", [1], np.int64),))) == ""  # a cast to int is not a float cast


# ------------------------------------------------------------------------------------------------ Expand
@pytest.mark.parametrize("target, fuses", [("shape_of_x", True), ("static_dims", True), ("ones", True),
                                           ("wider", False), ("other_dims", False)])
def test_expand_fuses_only_when_it_keeps_xs_shape(target: str, fuses: bool) -> None:
    reduce, axes_init = reduce_l2([1])
    shape_nodes = [helper.make_node("Shape", ["x"], ["t"])] if target == "shape_of_x" else []
    values = {"static_dims": [3, 6, 5], "ones": [1, 1], "wider": [2, 3, 6, 5], "other_dims": [3, 7, 5]}
    inits = (axes_init,) + ((const("t", values[target], np.int64),) if target in values else ())
    graph = model([reduce, *shape_nodes, helper.make_node("Expand", ["n", "t"], ["e"]),
                   helper.make_node("Div", ["x", "e"], ["y"])], inits=inits, shape=(3, 6, 5))
    if fuses:
        assert fused(graph) == (NO_CLAMP_EPS, 1)
    else:
        assert "Expand expands to a shape not proven equal to 'x'" in unfused(graph)


def test_the_report_names_what_was_fused() -> None:
    out, report = fuse_l2norm_with_report(normalize([helper.make_node("Max", ["n", "lo"], ["c"])],
                                                    inits=(const("lo", 0.25),)))
    (only,) = report.fused
    assert (only.axis, only.eps, only.spelling) == (1, 0.25, "ReduceL2 -> Max -> Div")
    assert report.summary().startswith(f"fused 1 L2 normalizations: {only.name} (ReduceL2 -> Max -> Div, axis=1")
    assert math.isclose(only.eps, 0.25) and out.graph.node[0].output[0] == "y"


@pytest.mark.parametrize("head, tail, fuses", [((0, 1), [6, 5], True), ((0, 1), [6, 4], False),
                                               ((1, 3), [1], False), ((0, 2), [5], True)])
def test_expand_to_a_concat_of_xs_own_dims(head: tuple[int, int], tail: list[int], fuses: bool) -> None:
    """The dynamo exporter's target: Concat(Shape(x)[a:b], constants), proven equal to x's shape dim by dim."""
    reduce, axes_init = reduce_l2([1])
    nodes = [reduce, helper.make_node("Shape", ["x"], ["head"], start=head[0], end=head[1]),
             helper.make_node("Concat", ["head", "tail"], ["t"], axis=0),
             helper.make_node("Expand", ["n", "t"], ["e"]), helper.make_node("Div", ["x", "e"], ["y"])]
    graph = model(nodes, inits=(axes_init, const("tail", tail, np.int64)))
    if fuses:
        assert fused(graph) == (NO_CLAMP_EPS, 1)
    else:
        assert "expands to a shape not proven equal to 'x'" in unfused(graph)


def test_operand_order_does_not_matter_where_the_op_commutes() -> None:
    def build(add: list[str], mul: list[str]) -> onnx.ModelProto:
        nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
                 helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=1),
                 helper.make_node("Add", add, ["sz"]), helper.make_node("Sqrt", ["sz"], ["n"]),
                 helper.make_node("Reciprocal", ["n"], ["r"]), helper.make_node("Mul", mul, ["y"])]
        return model(nodes, inits=(const("axes", [1], np.int64), const("zero", 0.0)))

    for add in (["s", "zero"], ["zero", "s"]):
        for mul in (["x", "r"], ["r", "x"]):
            assert fused(build(add, mul)) == (NO_CLAMP_EPS, 1), (add, mul)


def test_a_root_or_reciprocal_used_elsewhere_stays() -> None:
    nodes = [helper.make_node("ReduceSumSquare", ["x", "axes"], ["s"], keepdims=1),
             helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Reciprocal", ["n"], ["r"]),
             helper.make_node("Mul", ["x", "r"], ["y"])]
    inits = (const("axes", [1], np.int64),)
    assert "'s' is also used by Neg" in unfused(model([*nodes, helper.make_node("Neg", ["s"], ["z"])], inits=inits,
                                                       outputs=("y", "z")))
    assert "'r' is also a graph output" in unfused(model(nodes, inits=inits, outputs=("y", "r")))
