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


def fused(original: onnx.ModelProto, before: tuple[str, ...] = ()) -> tuple[float, int]:
    """(eps, axis) of the single L2Norm the graph fuses to (after the ops ``before``), after checking the numbers on
    onnxruntime."""
    out, report = fuse_l2norm_with_report(original)
    ops = [n.op_type for n in out.graph.node]
    assert ops == [*before, "L2Norm"], (report.summary(), ops)
    onnx.checker.check_model(out)
    x = np.random.default_rng(0).standard_normal(_example_shape(original)).astype(np.float32)
    x[(0, slice(None)) + (0,) * (x.ndim - 2)] = 1e-3  # a small vector: a clamp with a large eps shows in the numbers
    for want, got in zip(_run(original, x), _run(decompose_custom_ops(out), x)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    attrs = {a.name: helper.get_attribute_value(a) for a in out.graph.node[-1].attribute}
    assert len(report.fused) == 1 and report.fused[0].eps == pytest.approx(attrs["eps"])
    assert out.graph.node[-1].name == report.fused[0].name
    assert _initializers(out) == _kept_initializers(original, out)
    return float(attrs["eps"]), int(attrs["axis"])


def _example_shape(m: onnx.ModelProto) -> tuple[int, ...]:
    """``x``'s declared shape with 3 for each dimension not fixed; (3, 6, 5) where the rank is unknown."""
    tensor_type = m.graph.input[0].type.tensor_type
    if not tensor_type.HasField("shape"):
        return (3, 6, 5)
    return tuple(d.dim_value or 3 for d in tensor_type.shape.dim)


def _initializers(m: onnx.ModelProto) -> set[str]:
    return {t.name for t in m.graph.initializer}


def _kept_initializers(original: onnx.ModelProto, out: onnx.ModelProto) -> set[str]:
    """What the fusion should leave: every initializer the new graph reads, and those nothing read before either."""
    read_before = {i for n in original.graph.node for i in n.input}
    read_after = {i for n in out.graph.node for i in n.input}
    return {name for name in _initializers(original) if name in read_after or name not in read_before}


def unfused(original: onnx.ModelProto) -> str:
    """The near-miss reasons (joined; "" when no near miss was reported), after checking nothing changed."""
    out, report = fuse_l2norm_with_report(original)
    assert not report.fused and out.SerializeToString() == original.SerializeToString()
    return "; ".join(r for u in report.unfused for r in u.reasons)


def _run(m: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {m.graph.input[0].name: x.astype(np.float16) if m.graph.input[0].type.tensor_type.elem_type == F16
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


# ------------------------------------------------------------------------------------------------ more spellings
def _sum_of_squares(middle: list[onnx.NodeProto], tail: list[onnx.NodeProto], *, reduce: str = "ReduceSumSquare",
                    extra: tuple = (), **kwargs: object) -> onnx.ModelProto:
    """x -> ReduceSumSquare (writing "s") -> ``middle`` -> ``tail`` -> y."""
    nodes = [helper.make_node(reduce, ["x", "axes"], ["s"], keepdims=1), *middle, *tail]
    return model(nodes, inits=(const("axes", [1], np.int64), *extra), **kwargs)


@pytest.mark.parametrize("spelling", ["clip_expand_div", "clip_reciprocal_mul", "reciprocal_expand_mul",
                                      "expand_reciprocal_mul", "max_of_the_sum", "casts_everywhere"])
def test_every_order_of_clamp_expand_and_reciprocal_fuses(spelling: str) -> None:
    """The clamp, the Expand, the reciprocal and float Casts may appear in any order the exporters write them."""
    lo = const("lo", 0.5)
    shape = helper.make_node("Shape", ["x"], ["t"])
    graph = {
        "clip_expand_div": lambda: normalize([helper.make_node("Clip", ["n", "lo"], ["c0"]), shape,
                                              helper.make_node("Expand", ["c0", "t"], ["c"])], inits=(lo,)),
        "clip_reciprocal_mul": lambda: _sum_of_squares(
            [helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Clip", ["n", "lo"], ["c"])],
            [helper.make_node("Reciprocal", ["c"], ["r"]), helper.make_node("Mul", ["x", "r"], ["y"])], extra=(lo,)),
        "reciprocal_expand_mul": lambda: _sum_of_squares(
            [helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Reciprocal", ["n"], ["r"]), shape],
            [helper.make_node("Expand", ["r", "t"], ["e"]), helper.make_node("Mul", ["e", "x"], ["y"])]),
        "expand_reciprocal_mul": lambda: _sum_of_squares(
            [helper.make_node("Sqrt", ["s"], ["n"]), shape, helper.make_node("Expand", ["n", "t"], ["e"])],
            [helper.make_node("Reciprocal", ["e"], ["r"]), helper.make_node("Mul", ["x", "r"], ["y"])]),
        "max_of_the_sum": lambda: _sum_of_squares(
            [helper.make_node("Max", ["s", "e2"], ["sc"]), helper.make_node("Sqrt", ["sc"], ["n"])],
            [helper.make_node("Div", ["x", "n"], ["y"])], extra=(const("e2", 0.25),)),
        "casts_everywhere": lambda: _sum_of_squares(
            [helper.make_node("Cast", ["s"], ["s1"], to=F32), helper.make_node("Clip", ["s1", "e2"], ["s2"]),
             helper.make_node("Cast", ["s2"], ["s3"], to=F32), helper.make_node("Sqrt", ["s3"], ["n0"]),
             helper.make_node("Cast", ["n0"], ["n1"], to=F32), helper.make_node("Max", ["n1", "lo"], ["n2"]),
             helper.make_node("Cast", ["n2"], ["n"], to=F32)],
            [helper.make_node("Div", ["x", "n"], ["y"])], extra=(const("e2", 0.04), lo)),
    }[spelling]()
    eps = {"reciprocal_expand_mul": NO_CLAMP_EPS, "expand_reciprocal_mul": NO_CLAMP_EPS}.get(spelling, 0.5)
    assert fused(graph) == (pytest.approx(eps), 1)


def test_a_reduction_without_keepdims_keeps_the_axis_by_default() -> None:
    graph = model([helper.make_node("ReduceL2", ["x", "axes"], ["n"]), helper.make_node("Div", ["x", "n"], ["y"])],
                  inits=(const("axes", [1], np.int64),))
    assert fused(graph) == (NO_CLAMP_EPS, 1)


@pytest.mark.parametrize("form", ["value", "value_float", "value_floats", "value_ints", "value_int"])
def test_constants_written_as_constant_nodes(form: str) -> None:
    """The exporters write eps, axes and exponents as Constant nodes as often as initializers, in every form."""
    if form in ("value", "value_float", "value_floats"):
        value = {"value": numpy_helper.from_array(np.asarray(0.5, np.float32)), "value_float": 0.5,
                 "value_floats": [0.5]}[form]
        clamp = "Clip" if form == "value_float" else "Max"
        graph = normalize([helper.make_node("Constant", [], ["lo"], **{form: value}),
                           helper.make_node(clamp, ["n", "lo"], ["c"])])
        assert fused(graph) == (pytest.approx(0.5), 1)
    elif form == "value_ints":
        graph = model([helper.make_node("Constant", [], ["axes"], value_ints=[2]),
                       helper.make_node("ReduceL2", ["x", "axes"], ["n"], keepdims=1),
                       helper.make_node("Div", ["x", "n"], ["y"])])
        assert fused(graph) == (NO_CLAMP_EPS, 2)
    else:
        graph = model([helper.make_node("Constant", [], ["two"], value_int=2),
                       helper.make_node("Pow", ["x", "two"], ["sq"]),
                       helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=1),
                       helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Div", ["x", "n"], ["y"])],
                      inits=(const("axes", [1], np.int64),))
        assert fused(graph) == (NO_CLAMP_EPS, 1)


def test_a_clamp_bound_computed_by_another_op_is_not_a_constant() -> None:
    graph = normalize([helper.make_node("Identity", ["lo0"], ["lo"]), helper.make_node("Max", ["n", "lo"], ["c"])],
                      inits=(const("lo0", 0.5),))
    assert unfused(graph) == ""


# ------------------------------------------------------------------------------------------------ near misses
def test_what_is_not_an_l2_normalization_is_left_alone_silently() -> None:
    squares = {"mul_of_two_tensors": [helper.make_node("Mul", ["x", "z"], ["sq"])],
               "add_of_x_and_x": [helper.make_node("Add", ["x", "x"], ["sq"])]}
    z = (helper.make_tensor_value_info("z", F32, ("N", 6, 5)),)
    for name, square in squares.items():
        graph = model([*square, helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=1),
                       helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Div", ["x", "n"], ["y"])],
                      inits=(const("axes", [1], np.int64),), inputs=z)
        assert unfused(graph) == "", name
    reciprocal_added = _sum_of_squares(
        [helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Reciprocal", ["n"], ["r"])],
        [helper.make_node("Add", ["x", "r"], ["y"])])
    assert unfused(reciprocal_added) == ""
    norm_over_norm = normalize()
    norm_over_norm.graph.node[1].input[:] = ["n", "n"]
    assert unfused(norm_over_norm) == ""
    other_domain = normalize()
    other_domain.graph.node[0].domain = "com.example"
    other_domain.opset_import.append(helper.make_opsetid("com.example", 1))
    assert unfused(other_domain) == ""


def test_rank_two_inputs_and_the_report_of_a_near_miss() -> None:
    assert fused(normalize(shape=("N", 6))) == (NO_CLAMP_EPS, 1)  # L2Norm takes rank >= 2
    graph = normalize(keepdims=0)
    graph.graph.node[0].name = "the_norm"
    _, report = fuse_l2norm_with_report(graph)
    (miss,) = report.unfused
    assert (miss.node, miss.spelling) == ("the_norm", "ReduceL2 -> Div")
    assert report.summary() == "fused 0 L2 normalizations\nleft unfused the_norm (ReduceL2 -> Div): " + miss.reasons[0]


@pytest.mark.parametrize("used, reason", [
    ("squares", "'sq' (the squares) has other uses"), ("squares_output", "'sq' (the squares) has other uses"),
    ("sum_plus_zero", "'sz' is also used by Neg 'other'"), ("clamped_norm", "'c' is also used by Neg 'other'"),
    ("expanded", "'e' is also used by Neg 'other'"),
])
def test_every_intermediate_used_elsewhere_stays(used: str, reason: str) -> None:
    neg = lambda name: helper.make_node("Neg", [name], ["z"], name="other")  # noqa: E731
    if used.startswith("squares"):
        nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
                 helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=1),
                 helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Div", ["x", "n"], ["y"])]
        graph = model(nodes + ([neg("sq")] if used == "squares" else []), inits=(const("axes", [1], np.int64),),
                      outputs=("y", "z" if used == "squares" else "sq"))
    elif used == "sum_plus_zero":
        graph = _sum_of_squares(
            [helper.make_node("Add", ["s", "zero"], ["sz"]), helper.make_node("Sqrt", ["sz"], ["n"])],
            [helper.make_node("Div", ["x", "n"], ["y"]), neg("sz")], extra=(const("zero", 0.0),), outputs=("y", "z"))
    elif used == "clamped_norm":
        graph = normalize([helper.make_node("Clip", ["n", "lo"], ["c"]), neg("c")], inits=(const("lo", 0.5),),
                          outputs=("y", "z"))
    else:
        graph = _sum_of_squares(
            [helper.make_node("Sqrt", ["s"], ["n"]), helper.make_node("Reciprocal", ["n"], ["r"]),
             helper.make_node("Shape", ["x"], ["t"])],
            [helper.make_node("Expand", ["r", "t"], ["e"]), helper.make_node("Mul", ["x", "e"], ["y"]), neg("e")],
            outputs=("y", "z"))
    assert reason in unfused(graph)


def test_an_upper_clamp_of_the_sum_stays() -> None:
    graph = _sum_of_squares(
        [helper.make_node("Clip", ["s", "e2", "hi"], ["sc"]), helper.make_node("Sqrt", ["sc"], ["n"])],
        [helper.make_node("Div", ["x", "n"], ["y"])], extra=(const("e2", 0.25), const("hi", 9.0)))
    assert "also clamps from above" in unfused(graph)


# ------------------------------------------------------------------------------------------------ Expand targets
def _expand_to(target_nodes: list[onnx.NodeProto], *, inits: tuple = (), shape: tuple | None = ("N", 6, 5),
               inputs: tuple = ()) -> onnx.ModelProto:
    """x / Expand(ReduceL2(x), t) with ``t`` written by ``target_nodes``."""
    reduce, axes_init = reduce_l2([1])
    return model([reduce, *target_nodes, helper.make_node("Expand", ["n", "t"], ["e"]),
                  helper.make_node("Div", ["x", "e"], ["y"])], inits=(axes_init, *inits), shape=shape, inputs=inputs)


NOT_PROVEN = "expands to a shape not proven equal to 'x'"


def _of_unknown_rank(graph: onnx.ModelProto, name: str = "x") -> onnx.ModelProto:
    """``graph`` with input ``name`` computed by an Identity of a new input ``name`` + "0": an intermediate tensor
    without value_info, whose rank the pass cannot know (as in a model exported without shape inference)."""
    for value in graph.graph.input:
        if value.name == name:
            value.name = name + "0"
    graph.graph.node.insert(0, helper.make_node("Identity", [name + "0"], [name]))
    return graph


@pytest.mark.parametrize("case, fuses", [
    ("shape_of_x_unknown_rank", True),  # Shape(x) is x's shape whatever its rank
    ("shape_of_x_from_1_unknown_rank", False),
    ("shape_of_x_to_3_unknown_rank", False),  # an explicit end: not provable without the rank
    ("shape_of_another_tensor_unknown_rank", False),
    ("run_time_target", False),
    ("concat_with_a_run_time_part", False),
    ("product_of_shape_slices", False),  # Mul([N, 6], [5]) is not the concatenation [N, 6, 5]
    ("concat_on_axis_minus_1", True),
    ("constant_then_shape_from_1", True),
    ("shape_of_another_tensor_with_another_first_dim", False),
])
def test_expand_targets_are_proven_or_refused(case: str, fuses: bool) -> None:
    shape_x = helper.make_node("Shape", ["x"], ["t"])
    int_init = lambda name, v: const(name, v, np.int64)  # noqa: E731
    runtime = (helper.make_tensor_value_info("r", TensorProto.INT64, [3]),)
    graph = {
        "shape_of_x_unknown_rank": lambda: _of_unknown_rank(_expand_to([shape_x])),
        "shape_of_x_from_1_unknown_rank": lambda: _of_unknown_rank(
            _expand_to([helper.make_node("Shape", ["x"], ["t"], start=1)])),
        "shape_of_x_to_3_unknown_rank": lambda: _of_unknown_rank(
            _expand_to([helper.make_node("Shape", ["x"], ["t"], end=3)])),
        "shape_of_another_tensor_unknown_rank": lambda: _of_unknown_rank(
            _expand_to([helper.make_node("Shape", ["z"], ["t"])],
                       inputs=(helper.make_tensor_value_info("z0", F32, ("N", 6, 5)),)), "z"),
        "run_time_target": lambda: _expand_to([helper.make_node("Identity", ["r"], ["t"])], inputs=runtime),
        "concat_with_a_run_time_part": lambda: _expand_to(
            [helper.make_node("Shape", ["x"], ["h"], end=1), helper.make_node("Concat", ["h", "r"], ["t"], axis=0)],
            inputs=runtime),
        "product_of_shape_slices": lambda: _expand_to(
            [helper.make_node("Shape", ["x"], ["h"], end=2), helper.make_node("Shape", ["x"], ["l"], start=2),
             helper.make_node("Mul", ["h", "l"], ["t"])]),
        "concat_on_axis_minus_1": lambda: _expand_to(
            [helper.make_node("Shape", ["x"], ["h"], end=2), helper.make_node("Concat", ["h", "tail"], ["t"], axis=-1)],
            inits=(int_init("tail", [5]),)),
        "constant_then_shape_from_1": lambda: _expand_to(
            [helper.make_node("Shape", ["x"], ["l"], start=1),
             helper.make_node("Concat", ["head", "l"], ["t"], axis=0)],
            inits=(int_init("head", [3]),), shape=(3, 6, 5)),
        "shape_of_another_tensor_with_another_first_dim": lambda: _expand_to(
            [helper.make_node("Shape", ["z"], ["h"], end=2), helper.make_node("Concat", ["h", "tail"], ["t"], axis=0)],
            inits=(int_init("tail", [5]),), inputs=(helper.make_tensor_value_info("z", F32, (7, 6, 5)),)),
    }[case]()
    if fuses:
        assert fused(graph, ("Identity",) if "unknown_rank" in case else ()) == (NO_CLAMP_EPS, 1)
    else:
        assert NOT_PROVEN in unfused(graph)


@pytest.mark.parametrize("x_dims, z_dims, fuses", [
    (("N", 6, 5), ("N", 6, 5), True),  # one dim_param is one value throughout the graph
    ((None, 6, 5), (None, 6, 5), False),  # two unnamed unknown dims may differ
    ((3, 6, 5), (3, 6, 5), True),
    ((0, 6, 5), (0, 6, 5), True),  # an empty batch is a static dim too
])
def test_expand_to_the_shape_of_another_input(x_dims: tuple, z_dims: tuple, fuses: bool) -> None:
    graph = _expand_to([helper.make_node("Shape", ["z"], ["t"])], shape=x_dims,
                       inputs=(helper.make_tensor_value_info("z", F32, z_dims),))
    out, report = fuse_l2norm_with_report(graph)
    if fuses:
        assert [n.op_type for n in out.graph.node] == ["L2Norm"] and len(report.fused) == 1
    else:
        assert NOT_PROVEN in "; ".join(r for u in report.unfused for r in u.reasons)


# ------------------------------------------------------------------------------------------------ the rewrite
def _surrounded() -> onnx.ModelProto:
    """x0 -> Relu -> x -> [Pow, ReduceSum, Clip, Sqrt, Div] -> y -> ReduceMax -> z, with constants of every fate:
    ``two`` (initializer) and ``e2`` (Constant node) read by the chain alone, ``axes`` also by the ReduceMax, ``stray``
    read by nothing; value_info for the Relu's output and for two of the chain's intermediates."""
    nodes = [helper.make_node("Relu", ["x0"], ["x"], name="relu"),
             helper.make_node("Constant", [], ["e2"], name="eps_squared", value=numpy_helper.from_array(
                 np.asarray(0.25, np.float32))),
             helper.make_node("Pow", ["x", "two"], ["sq"], name="square"),
             helper.make_node("ReduceSum", ["sq", "axes"], ["s"], name="sum", keepdims=1),
             helper.make_node("Clip", ["s", "e2"], ["sc"], name="clamp"),
             helper.make_node("Sqrt", ["sc"], ["n"], name="root"),
             helper.make_node("Div", ["x", "n"], ["y"], name="divide"),
             helper.make_node("ReduceMax", ["y", "axes"], ["z"], name="peak", keepdims=1)]
    info = [helper.make_tensor_value_info(name, F32, None) for name in ("x", "sq", "n")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x0", F32, ("N", 6, 5))],
                              [helper.make_tensor_value_info("y", F32, ("N", 6, 5)),
                               helper.make_tensor_value_info("z", F32, ("N", 1, 5))],
                              [const("two", 2.0), const("axes", [1], np.int64), const("stray", 7.0)],
                              value_info=info)
    built = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    built.ir_version = 9
    return built


def test_the_rest_of_the_graph_stays_as_it_was() -> None:
    original = _surrounded()
    out, report = fuse_l2norm_with_report(original)
    assert [(n.op_type, n.name) for n in out.graph.node] == [("Relu", "relu"), ("L2Norm", "divide/L2Norm"),
                                                             ("ReduceMax", "peak")]
    assert _initializers(out) == {"axes", "stray"}  # what only the chain read is gone; the rest stays
    assert [v.name for v in out.graph.value_info] == ["x"]
    (only,) = report.fused
    assert only.name == "divide/L2Norm" and only.eps == pytest.approx(0.5)
    assert only.replaced == ("square", "sum", "clamp", "root", "divide")  # in graph order
    assert only.spelling == "Pow -> ReduceSum -> Clip -> Sqrt -> Div"
    onnx.checker.check_model(out, full_check=True)
    x = np.random.default_rng(2).standard_normal((4, 6, 5)).astype(np.float32)
    sessions = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
                for m in (original, decompose_custom_ops(out))]
    for want, got in zip(*(s.run(None, {"x0": x}) for s in sessions)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("final, reduction, other, expected", [
    ("divide", "norm", "", "divide/L2Norm"),
    ("", "norm", "", "norm/L2Norm"),
    ("", "", "", "node/L2Norm"),
    ("divide", "norm", "divide/L2Norm", "divide/L2Norm_1"),  # a name already taken gets a suffix
])
def test_the_fused_node_is_named_after_the_chain(final: str, reduction: str, other: str, expected: str) -> None:
    graph = normalize(outputs=("y", "z"))
    graph.graph.node[0].name, graph.graph.node[1].name = reduction, final
    graph.graph.node.append(helper.make_node("Neg", ["x"], ["z"], name=other))
    out, report = fuse_l2norm_with_report(graph)
    assert [n.name for n in out.graph.node] == [expected, other] and report.fused[0].name == expected


def test_several_normalizations_in_one_graph_after_near_misses() -> None:
    """Each reduction is tried: those that are not normalizations or are near misses do not stop the others."""
    inits = (const("axes", [1], np.int64), const("lo", 0.5), const("hi", 9.0))
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["plain_sum"], keepdims=1),  # not a sum of squares
             helper.make_node("ReduceL2", ["x", "axes"], ["n0"], keepdims=1, name="miss"),
             helper.make_node("Clip", ["n0", "lo", "hi"], ["c0"]), helper.make_node("Div", ["x", "c0"], ["y0"]),
             helper.make_node("ReduceL2", ["x", "axes"], ["n1"], keepdims=1),
             helper.make_node("Div", ["x", "n1"], ["y1"]),
             helper.make_node("ReduceL2", ["y1", "axes"], ["n2"], keepdims=1),
             helper.make_node("Div", ["y1", "n2"], ["y"])]
    graph = model(nodes, inits=inits, outputs=("y", "y0", "plain_sum"))
    out, report = fuse_l2norm_with_report(graph)
    assert [n.op_type for n in out.graph.node] == ["ReduceSum", "ReduceL2", "Clip", "Div", "L2Norm", "L2Norm"]
    assert [u.node for u in report.unfused] == ["miss"]
    assert [f.name for f in report.fused] == ["node/L2Norm", "node/L2Norm_1"]  # unnamed chains: distinct names
    onnx.checker.check_model(out)


def test_a_taken_name_and_its_first_suffixes_are_skipped() -> None:
    graph = normalize(outputs=("y", "z", "w"))
    graph.graph.node[1].name = "divide"
    graph.graph.node.extend([helper.make_node("Neg", ["x"], ["z"], name="divide/L2Norm"),
                             helper.make_node("Abs", ["x"], ["w"], name="divide/L2Norm_1")])
    assert fuse_l2norm_with_report(graph)[1].fused[0].name == "divide/L2Norm_2"


def test_a_constant_also_read_inside_a_subgraph_stays() -> None:
    """A name the chain reads may also be read, from the outer scope, by an If branch; it must survive the fusion."""
    branch = lambda name: helper.make_graph([helper.make_node("Identity", ["lo"], [name])], name, [],  # noqa: E731
                                            [helper.make_tensor_value_info(name, F32, [])])
    graph = normalize([helper.make_node("Max", ["n", "lo"], ["c"]),
                       helper.make_node("ReduceMax", ["x", "axes"], ["m"], keepdims=1),  # axes: read again
                       helper.make_node("If", ["flag"], ["z"], then_branch=branch("a"), else_branch=branch("b"))],
                      inits=(const("lo", 0.5),), outputs=("y", "z", "m"),
                      inputs=(helper.make_tensor_value_info("flag", TensorProto.BOOL, []),))
    graph.graph.output[1].type.tensor_type.shape.Clear()
    out, report = fuse_l2norm_with_report(graph)
    assert len(report.fused) == 1 and {"lo", "axes"} <= _initializers(out)
    onnx.checker.check_model(out)


def test_fuse_l2norm_logs_its_report(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from torchtrt_ext.passes.fuse_l2norm import fuse_l2norm

    graph = normalize([helper.make_node("Max", ["n", "lo"], ["c"])], inits=(const("lo", 0.25),))
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        out = fuse_l2norm(graph.SerializeToString())
    expected, report = fuse_l2norm_with_report(graph)
    assert out.SerializeToString() == expected.SerializeToString()
    assert report.summary() in caplog.messages


@pytest.mark.parametrize("case, reason", [
    ("two_casts_up", None), ("squares_output_between_casts", "'sq1' has other uses"),
    ("sum_output_before_a_cast", ""),  # the sum is kept as an output: not matched, the graph stays
])
def test_chains_of_casts_around_the_sum(case: str, reason: str | None) -> None:
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]), helper.make_node("Cast", ["sq"], ["sq1"], to=F32),
             helper.make_node("Cast", ["sq1"], ["sq2"], to=F32),
             helper.make_node("ReduceSum", ["sq2", "axes"], ["s"], keepdims=1),
             helper.make_node("Cast", ["s"], ["s1"], to=F32), helper.make_node("Sqrt", ["s1"], ["n"]),
             helper.make_node("Div", ["x", "n"], ["y"])]
    extra = {"two_casts_up": (), "squares_output_between_casts": ("sq1",), "sum_output_before_a_cast": ("s",)}[case]
    graph = model(nodes, inits=(const("axes", [1], np.int64),), outputs=("y", *extra))
    if reason is None:
        assert fused(graph) == (NO_CLAMP_EPS, 1)
    else:
        assert reason in unfused(graph) if reason else unfused(graph) == ""
