"""An op defined here, not in the library (two inputs, two outputs), gets every layer from its OpSpec alone.

Each test defines its own op (a fresh name: an op is defined once per process), so the definition runs inside the
test: a mutation test then sees every layer it registers (torch schema, fake kernel, autograd, ONNX schema,
both exporters' hooks) built by the code under test, not by an import that ran before.
"""
from __future__ import annotations

import itertools

import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext.errors import InvalidAttributeError, InvalidInputError, OpDefinitionError, UnknownOpError
from torchtrt_ext.ops import Attr, CustomOp, Decomposer, OpSpec, define_op, get_op
from tests.helpers import rel_err, run_onnx


def _eager(a: torch.Tensor, b: torch.Tensor, alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    return a + alpha * b, a * b


def _shape_rule(shapes: list, dtypes: list, alpha: float) -> list:
    return [(shapes[0], dtypes[0]), (shapes[0], dtypes[0])]


def _decompose(d: Decomposer, inputs: list[str], outputs: list[str], alpha: float) -> None:
    a, b = inputs
    d.op("Add", a, d.op("Mul", b, d.op("CastLike", d.const(alpha), b)), out=outputs[0])
    d.op("Mul", a, b, out=outputs[1])


_SERIAL = itertools.count()


def axpy_prod_spec(**changes: object) -> OpSpec:
    """The spec of a (a + alpha*b, a*b) op under a name not defined yet in this process."""
    fields = dict(name=f"TestAxpyProd{next(_SERIAL)}", inputs=("a", "b"), outputs=("axpy", "prod"),
                  attrs=(Attr("alpha", "float", default=1.0, check=lambda v: v != 0, allowed="a non-zero float"),),
                  eager=_eager, shape_rule=_shape_rule, decompose=_decompose, doc="(a + alpha*b, a*b)")
    return OpSpec(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.fixture
def axpy_prod() -> torchtrt_ext.ops.CustomOp:
    return define_op(axpy_prod_spec())


class UsesIt(torch.nn.Module):
    def __init__(self, op: torchtrt_ext.ops.CustomOp) -> None:
        super().__init__()
        self.op = op

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s, p = self.op(a.relu(), b, alpha=0.5)
        return s * 2, p


def test_eager_and_autograd(axpy_prod: torchtrt_ext.ops.CustomOp) -> None:
    a, b = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    s, p = axpy_prod(a, b, alpha=0.5)
    assert torch.equal(s, a + 0.5 * b) and torch.equal(p, a * b)
    (s.sum() + p.sum()).backward()
    assert torch.allclose(a.grad, 1 + b) and torch.allclose(b.grad, 0.5 + a)


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_both_exports_and_decomposition(axpy_prod: torchtrt_ext.ops.CustomOp, exporter: str) -> None:
    a, b = torch.randn(2, 5), torch.randn(2, 5)
    model = torchtrt_ext.export_onnx(UsesIt(axpy_prod).eval(), (a, b), exporter=exporter)
    custom = [n for n in model.graph.node if n.domain == "torchtrt_ext"]
    assert [n.op_type for n in custom] == [axpy_prod.spec.name] and len(custom[0].output) == 2
    attrs = {x.name: onnx.helper.get_attribute_value(x) for x in custom[0].attribute}
    assert attrs == {"alpha": 0.5, "plugin_version": b"1", "plugin_namespace": b"torchtrt_ext"}
    infos = {v.name for v in model.graph.value_info}
    assert set(custom[0].output) <= infos | {o.name for o in model.graph.output}  # shapes pass through
    decomposed = torchtrt_ext.passes.decompose_custom_ops(model)
    a, b = torch.randn(6, 5), torch.randn(6, 5)
    got = run_onnx(decomposed, {"a": a, "b": b})
    for g, r in zip(got, UsesIt(axpy_prod)(a, b)):
        assert rel_err(g, r) < 1e-6


def test_attribute_rule_applies_to_user_ops(axpy_prod: torchtrt_ext.ops.CustomOp) -> None:
    with pytest.raises(InvalidAttributeError, match="alpha=0.0 is not allowed. Allowed: a non-zero float"):
        axpy_prod(torch.randn(2), torch.randn(2), alpha=0.0)


def test_defining_twice_is_refused(axpy_prod: torchtrt_ext.ops.CustomOp) -> None:
    with pytest.raises(torchtrt_ext.errors.OpDefinitionError, match="already defined"):
        define_op(axpy_prod.spec)


@pytest.mark.parametrize("changes, match", [
    ({"name": "Not An Identifier"}, "needs an identifier name, inputs and outputs"),
    ({"inputs": ()}, "needs an identifier name, inputs and outputs"),
    ({"outputs": ()}, "needs an identifier name, inputs and outputs"),
    ({"inputs": ("a", "alpha")}, r"input and attribute names must be unique, got \['a', 'alpha', 'alpha'\]"),
    ({"inputs": ("a", "b", "c"), "optional_inputs": ("b",)}, r"optional inputs \['b'\] must be the last inputs"),
    ({"output_dtypes": (torch.int64,)}, r"output_dtypes needs one entry \(a dtype or None\) per output"),
])
def test_an_inconsistent_definition_is_refused_with_the_rule(changes: dict, match: str) -> None:
    with pytest.raises(torchtrt_ext.errors.OpDefinitionError, match=match):
        define_op(axpy_prod_spec(**changes))


def test_a_plugin_named_unlike_the_op_is_refused() -> None:
    from torchtrt_ext.ops import PluginRef

    name = f"TestAxpyProd{next(_SERIAL)}"
    for plugin in (PluginRef("Other"), PluginRef(name, version="2"), PluginRef(name, provider="someone")):
        with pytest.raises(torchtrt_ext.errors.OpDefinitionError, match="must be named and versioned like the op"):
            axpy_prod_spec(name=name, plugin=plugin)


def _count_positive(x: torch.Tensor, scale: torch.Tensor | None, *, offset: float) -> tuple:
    y = x + offset if scale is None else x * scale + offset
    return y, (y > 0).sum(dim=-1)


def _count_shapes(shapes: list, dtypes: list, offset: float) -> list:
    return [(shapes[0], dtypes[0]), (shapes[0][:-1], torch.int64)]


def _count_decompose(d: Decomposer, inputs: list[str], outputs: list[str], offset: float) -> None:
    x = inputs[0] if len(inputs) < 2 or not inputs[1] else d.op("Mul", inputs[0], inputs[1])
    y = d.op("Add", x, d.const(offset), out=outputs[0])  # float32 only: no CastLike, so opsets before 15 work
    positive = d.op("Cast", d.op("Greater", y, d.const(0.0)), to=onnx.TensorProto.INT64)
    d.reduce("ReduceSum", positive, [-1], keepdims=False, out=outputs[1])


@pytest.fixture
def count_positive() -> torchtrt_ext.ops.CustomOp:
    """An op with an optional last input, an int64 output and no gradient: (x*scale + offset, count of y > 0)."""
    return define_op(OpSpec(name=f"TestCountPositive{next(_SERIAL)}", inputs=("x", "scale"), outputs=("y", "count"),
                            attrs=(Attr("offset", "float", default=0.0),), eager=_count_positive,
                            shape_rule=_count_shapes, decompose=_count_decompose, optional_inputs=("scale",),
                            output_dtypes=(None, torch.int64), differentiable=False, dtypes=(torch.float32,)))


def test_optional_input_and_fixed_output_dtype_in_eager_and_meta_calls(
        count_positive: torchtrt_ext.ops.CustomOp) -> None:
    x, scale = torch.randn(3, 4, 5), torch.randn(5)
    for args in ((x,), (x, scale)):
        y, count = count_positive(*args, offset=0.25)
        ref_y, ref_count = _count_positive(x, args[1] if len(args) > 1 else None, offset=0.25)
        assert torch.equal(y, ref_y) and torch.equal(count, ref_count) and count.dtype == torch.int64
        # meta tensors (what torch.compile and torch.export trace with) take the shape rule's shapes and dtypes
        meta_y, meta_count = count_positive(*(t.to("meta") for t in args), offset=0.25)
        assert (meta_y.shape, meta_y.dtype, meta_count.shape, meta_count.dtype) == (
            (3, 4, 5), torch.float32, (3, 4), torch.int64)
        assert meta_y.device.type == "meta" == meta_count.device.type


def test_a_gradient_through_a_non_differentiable_op_is_refused(count_positive: torchtrt_ext.ops.CustomOp) -> None:
    x = torch.randn(2, 3, requires_grad=True)
    y, _ = count_positive(x, offset=1.0)
    with pytest.raises(torchtrt_ext.errors.InvalidInputError, match=r"a gradient was asked for.*torch.no_grad\(\)"):
        y.sum().backward()


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
@pytest.mark.parametrize("with_scale", [False, True])
def test_optional_input_and_fixed_output_dtype_through_export(count_positive: torchtrt_ext.ops.CustomOp,
                                                              exporter: str, with_scale: bool) -> None:
    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor, scale: torch.Tensor) -> tuple:
            return count_positive(x, scale if with_scale else None, offset=-0.5)

    x, scale = torch.randn(2, 3, 4), torch.randn(2, 3, 4)  # dim 0 of every input is the (dynamic) batch
    model = torchtrt_ext.export_onnx(Model().eval(), (x, scale), exporter=exporter)
    (node,) = [n for n in model.graph.node if n.domain == "torchtrt_ext"]
    assert len([i for i in node.input if i]) == (2 if with_scale else 1)
    types = {v.name: v.type.tensor_type for v in [*model.graph.value_info, *model.graph.output]}
    assert types[node.output[1]].elem_type == onnx.TensorProto.INT64
    dims = types[node.output[1]].shape.dim  # [batch (dynamic by default), 3]: the rule drops the last dim
    assert len(dims) == 2 and dims[1].dim_value == 3
    decomposed = torchtrt_ext.passes.decompose_custom_ops(model)
    feeds = {i.name: t for i, t in zip(decomposed.graph.input, (x, scale))}
    got_y, got_count = run_onnx(decomposed, feeds)
    ref_y, ref_count = _count_positive(x, scale if with_scale else None, offset=-0.5)
    assert rel_err(got_y, ref_y) < 1e-6 and (got_count == ref_count.numpy()).all()


@pytest.mark.parametrize("opset", [12, 13, 17, 18])  # ReduceSum's axes: an attribute before 13, an input from 13
def test_a_hand_built_node_decomposes_at_every_opset(count_positive: torchtrt_ext.ops.CustomOp, opset: int) -> None:
    spec = count_positive.spec
    node = spec.make_node(["x"], ["y", "count"], name="counter", offset=-0.25)  # scale absent
    graph = onnx.helper.make_graph(
        [node], "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3, 4]),
         onnx.helper.make_tensor_value_info("count", onnx.TensorProto.INT64, [2, 3])])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset),
                                                         onnx.helper.make_opsetid("torchtrt_ext", 1)])
    x = torch.randn(2, 3, 4)
    got_y, got_count = run_onnx(torchtrt_ext.passes.decompose_custom_ops(model), {"x": x})
    ref_y, ref_count = _count_positive(x, None, offset=-0.25)
    assert rel_err(got_y, ref_y) < 1e-6 and got_count.shape == (2, 3) and (got_count == ref_count.numpy()).all()


def test_onnx_checks_nodes_against_the_op_schema(count_positive: torchtrt_ext.ops.CustomOp) -> None:
    """ONNX's checker accepts a node with only its required inputs and no optional attributes (plugin_version and
    plugin_namespace included), and refuses one without a required input."""
    name, helper = count_positive.spec.name, onnx.helper
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])

    def model(inputs: list[str]) -> onnx.ModelProto:
        nodes = [helper.make_node(name, inputs, ["y0", "count0"], domain="torchtrt_ext"),
                 helper.make_node("Identity", ["y0"], ["y"]), helper.make_node("Identity", ["count0"], ["count"])]
        outputs = [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3]),
                   helper.make_tensor_value_info("count", onnx.TensorProto.INT64, [2])]
        opsets = [helper.make_opsetid("", 18), helper.make_opsetid("torchtrt_ext", 1)]
        return helper.make_model(helper.make_graph(nodes, "g", [x], outputs), opset_imports=opsets)

    onnx.checker.check_model(model(["x"]), full_check=True)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model([]))


def _sum_and_double(a: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return 2 * a if b is None else 2 * a + b


@pytest.fixture
def sum_and_double() -> torchtrt_ext.ops.CustomOp:
    """A one-output differentiable op with an optional input: 2a (+ b)."""
    return define_op(OpSpec(name=f"TestSumDouble{next(_SERIAL)}", inputs=("a", "b"), outputs=("y",), attrs=(),
                            eager=_sum_and_double, shape_rule=lambda shapes, dtypes: [(shapes[0], dtypes[0])],
                            decompose=lambda d, inputs, outputs: None, optional_inputs=("b",)))


def test_one_output_op_returns_a_tensor_and_its_gradient(sum_and_double: torchtrt_ext.ops.CustomOp) -> None:
    a, b = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    y = sum_and_double(a)  # the optional input absent
    assert isinstance(y, torch.Tensor) and torch.equal(y, 2 * a)
    y.sum().backward()
    assert torch.equal(a.grad, torch.full((3,), 2.0))
    a.grad = None
    sum_and_double(a, b).pow(2).sum().backward()
    assert torch.allclose(a.grad, 4 * (2 * a + b)) and torch.allclose(b.grad, 2 * (2 * a + b))


def test_a_gradient_through_one_output_ignores_inputs_it_does_not_use() -> None:
    """(2a, 3a) with b read for nothing but its presence (a 'like' input): b gets no gradient, not an error."""
    op = define_op(OpSpec(name=f"TestDoubleTriple{next(_SERIAL)}", inputs=("a", "b"), outputs=("twice", "thrice"),
                          attrs=(), eager=lambda a, b: (2 * a, 3 * a),
                          shape_rule=lambda shapes, dtypes: [(shapes[0], dtypes[0])] * 2,
                          decompose=lambda d, inputs, outputs: None))
    a, b = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    twice, thrice = op(a, b)
    (twice + thrice).sum().backward()
    assert torch.equal(a.grad, torch.full((4,), 5.0)) and b.grad is None


def test_a_missing_attribute_and_a_buffer_are_described() -> None:
    from torchtrt_ext.ops import Buffer

    with pytest.raises(KeyError, match="'nope'"):
        axpy_prod_spec().attr("nope")
    t = torch.zeros(2, 3, dtype=torch.float16)
    assert Buffer.of(t) == Buffer(t.data_ptr(), (2, 3), torch.float16)


def _shifted(x: torch.Tensor, shifts: tuple[int, ...]) -> torch.Tensor:
    return x + sum(shifts)


@pytest.mark.parametrize("exporter", ["legacy", "dynamo"])
def test_a_one_output_op_with_a_list_attribute_through_both_exporters(exporter: str) -> None:
    op = define_op(OpSpec(name=f"TestShifted{next(_SERIAL)}", inputs=("x",), outputs=("y",),
                          attrs=(Attr("shifts", "ints", default=(0, 0)),), eager=_shifted,
                          shape_rule=lambda shapes, dtypes, shifts: [(shapes[0], dtypes[0])],
                          decompose=lambda d, inputs, outputs, shifts: d.op(
                              "Add", inputs[0], d.const(float(sum(shifts))), out=outputs[0])))

    class Model(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return op(x, shifts=(2, 3)) * 2

    x = torch.randn(2, 4)
    assert torch.equal(op(x, shifts=(2, 3)), x + 5)
    assert torch.equal(op(x, shifts=(1, 3)), x + 4)
    with pytest.raises(InvalidAttributeError, match=r"shifts must be a list of int, got \(True, 3\)"):
        op(x, shifts=(True, 3))  # after a cached call with equal values (True == 1): bools are still refused
    model = torchtrt_ext.export_onnx(Model().eval(), (x,), exporter=exporter)
    (node,) = [n for n in model.graph.node if n.domain == "torchtrt_ext"]
    assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}["shifts"] == [2, 3]
    types = {v.name: v.type.tensor_type for v in [*model.graph.value_info, *model.graph.output]}
    assert types[node.output[0]].elem_type == onnx.TensorProto.FLOAT and len(types[node.output[0]].shape.dim) == 2
    (got,) = run_onnx(torchtrt_ext.passes.decompose_custom_ops(model), {model.graph.input[0].name: x})
    assert rel_err(got, (x + 5) * 2) < 1e-6


def test_definitions_that_are_valid_or_collide() -> None:
    from torchtrt_ext.ops import PluginRef

    # three inputs, the last optional: valid
    define_op(axpy_prod_spec(inputs=("a", "b", "c"), optional_inputs=("c",),
                             eager=lambda a, b, c, alpha: _eager(a, b, alpha)))
    # another torch name, but the ONNX name of an op already defined: refused
    first = define_op(axpy_prod_spec())
    with pytest.raises(torchtrt_ext.errors.OpDefinitionError, match="already defined"):
        define_op(axpy_prod_spec(name=first.spec.name, torch_name=f"other_{first.spec.op_name}"))
    # a fallback plugin: ours, named and versioned like the op, only for an op bound to TensorRT's plugin
    name = f"TestAxpyProd{next(_SERIAL)}"
    theirs = PluginRef(name, namespace="", provider="tensorrt")
    assert axpy_prod_spec(name=name, plugin=theirs, fallback_plugin=PluginRef(name)).fallback_plugin == PluginRef(name)
    for plugin, fallback in ((PluginRef(name), PluginRef(name)), (theirs, PluginRef(name, provider="tensorrt")),
                             (theirs, PluginRef(name, version="2")), (theirs, PluginRef("Other"))):
        with pytest.raises(torchtrt_ext.errors.OpDefinitionError, match="fallback_plugin .* must be ours"):
            axpy_prod_spec(name=name, plugin=plugin, fallback_plugin=fallback)


def _weighted_op(**changes: object) -> CustomOp:
    """x * sum(weights), with a float-list attribute."""
    fields = dict(name=f"TestWeighted{next(_SERIAL)}", inputs=("x",), outputs=("y",),
                  attrs=(Attr("weights", "floats", default=(1.0,), doc="the factors whose sum scales x"),),
                  eager=lambda x, weights: x * sum(weights),
                  shape_rule=lambda shapes, dtypes, weights: [(shapes[0], dtypes[0])],
                  decompose=lambda d, inputs, outputs, weights: d.op(
                      "Mul", inputs[0], d.const(float(sum(weights))), out=outputs[0]))
    return define_op(OpSpec(**{**fields, **changes}))  # type: ignore[arg-type]


def test_a_float_list_attribute_is_checked_and_kept_as_floats() -> None:
    op = _weighted_op()
    name, x = op.spec.name, torch.randn(2, 3)
    assert torch.equal(op(x, weights=(0.5, 2)), x * 2.5)  # ints are floats here
    # the node carries FLOATS, as the schema says, even for a list written with ints
    node = op.spec.make_node(["x"], ["y"], weights=[1, 2])
    (weights,) = [a for a in node.attribute if a.name == "weights"]
    assert weights.type == onnx.AttributeProto.FLOATS and list(weights.floats) == [1.0, 2.0]
    with pytest.raises(InvalidAttributeError, match=rf"^{name}: argument weights=1e-46 does not survive float32"):
        op(x, weights=(1.0, 1e-46))
    with pytest.raises(InvalidAttributeError, match=rf"^{name}: argument weights must be a list of float, got \(1.0, 'a'\)"):
        op(x, weights=(1.0, "a"))
    assert torch.equal(op(x, weights=(1.0, 2.0)), x * 3)
    with pytest.raises(InvalidAttributeError, match=r"weights must be a list of float, got \(True, 2.0\)"):
        op(x, weights=(True, 2.0))  # after a cached call with equal values (True == 1.0): bools are still refused


def test_a_wrong_attribute_type_is_named_with_the_allowed_values_if_any() -> None:
    axpy, weighted = define_op(axpy_prod_spec()), _weighted_op()
    with pytest.raises(InvalidAttributeError) as raised:
        axpy(torch.randn(2), torch.randn(2), alpha="x")
    assert str(raised.value) == (f"{axpy.spec.name}: argument alpha must be of type float, got str 'x'. "
                                 "Allowed: a non-zero float.")
    with pytest.raises(InvalidAttributeError) as raised:
        weighted(torch.randn(2), weights=2.5)
    assert str(raised.value) == f"{weighted.spec.name}: argument weights must be of type floats, got float 2.5."


def test_an_unknown_op_type_is_named_with_the_remedy() -> None:
    with pytest.raises(UnknownOpError) as raised:
        get_op("NoSuchOp")
    assert isinstance(raised.value, KeyError)
    assert "'NoSuchOp'" in raised.value.what and "'L2Norm'" in raised.value.what  # the known ones listed
    assert "define_op" in raised.value.remedy and "Remedy: import the module" in str(raised.value)


def test_wrong_input_counts_and_types_are_named() -> None:
    op = define_op(axpy_prod_spec(inputs=("a", "b", "c", "d"), optional_inputs=("c", "d"),
                                  eager=lambda a, b, c, d, alpha: _eager(a, b, alpha)))
    a = torch.randn(3)
    for args in ((a,), (a,) * 5):
        with pytest.raises(InvalidInputError, match=rf"expected inputs \['a', 'b', 'c', 'd'\] "
                                                    rf"\(optional: \['c', 'd'\]\), got {len(args)} tensors"):
            op(*args)
    with pytest.raises(InvalidInputError, match=r"input 'c' has dtype torch.int32; allowed: .*Remedy: cast it"):
        op(a, a, a.int())  # an optional input, when given, is checked like the others
    with pytest.raises(InvalidInputError, match=r"input 'd' has dtype torch.int32"):
        op(a, a, None, a.int())  # and so is one after an absent one
    with pytest.raises(InvalidInputError, match=r"input 'c' must be a torch.Tensor, got list"):
        op(a, a, [1.0])


def test_an_eager_function_returning_another_number_of_outputs_is_refused() -> None:
    # one tensor of 2 rows for 2 outputs: refused, not split into its rows (a silently wrong result)
    one = define_op(axpy_prod_spec(eager=lambda a, b, alpha: a + b))
    with pytest.raises(OpDefinitionError, match="eager function must return 2 tensors, got Tensor"):
        one(torch.randn(2, 3), torch.randn(2, 3))
    # three for two: refused before torch's dispatcher sees them (it may crash on more outputs than its schema has)
    three = define_op(axpy_prod_spec(eager=lambda a, b, alpha: [a, b, a * b]))
    with pytest.raises(OpDefinitionError, match="eager function must return 2 tensors, got list"):
        three(torch.randn(2), torch.randn(2))


def _counting_axpy_prod(**changes: object) -> tuple[CustomOp, list]:
    """An axpy_prod op whose ``prepare`` (run by the checks of each new call signature) records the input shapes."""
    prepared: list = []

    def prepare(shapes: list, dtypes: list, alpha: float) -> dict:
        prepared.append(shapes)
        return {"alpha": alpha}

    return define_op(axpy_prod_spec(prepare=prepare, **changes)), prepared


def test_calls_with_and_without_an_optional_input_are_each_checked_once() -> None:
    op, prepared = _counting_axpy_prod(inputs=("a", "b", "c"), optional_inputs=("c",),
                                       eager=lambda a, b, c, alpha: _eager(a, b, alpha))
    a = torch.randn(3)
    for _ in range(3):
        op(a, a)
        op(a, a, None)
    assert len(prepared) == 2  # two call signatures, each checked on its first call
    assert "Tensor a, Tensor b, Tensor? c" in str(op.torch_op.default._schema)  # only c may be None for torch too


def test_an_op_remembers_a_bounded_number_of_call_signatures() -> None:
    from torchtrt_ext.ops._torch_op import _MAX_SIGNATURES

    op, prepared = _counting_axpy_prod()
    inputs = [torch.randn(n + 1) for n in range(_MAX_SIGNATURES + 1)]  # each length its own signature
    for x in inputs[:_MAX_SIGNATURES]:
        op(x, x)
    op(inputs[0], inputs[0])
    assert len(prepared) == _MAX_SIGNATURES  # every one remembered so far
    op(inputs[-1], inputs[-1])  # one more: the record starts over
    op(inputs[0], inputs[0])
    assert len(prepared) == _MAX_SIGNATURES + 2


def test_an_op_of_version_2_binds_plugin_version_2() -> None:
    op = define_op(axpy_prod_spec(version="2"))
    assert op.spec.plugin_ref.id == f"torchtrt_ext::{op.spec.name}:2"
    node = op.spec.make_node(["a", "b"], ["s", "p"])
    assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}["plugin_version"] == b"2"


def test_a_decomposition_reduces_keeping_dims_unless_told() -> None:
    op = define_op(OpSpec(name=f"TestRowSum{next(_SERIAL)}", inputs=("x",), outputs=("y",), attrs=(),
                          eager=lambda x: x.sum(-1, keepdim=True),
                          shape_rule=lambda shapes, dtypes: [(shapes[0][:-1] + (1,), dtypes[0])],
                          decompose=lambda d, inputs, outputs: d.reduce("ReduceSum", inputs[0], [-1], out=outputs[0])))
    helper = onnx.helper
    graph = helper.make_graph([op.spec.make_node(["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("torchtrt_ext", 1)])
    x = torch.randn(2, 3)
    (got,) = run_onnx(torchtrt_ext.passes.decompose_custom_ops(model), {"x": x})
    assert got.shape == (2, 1) and rel_err(got, op(x)) < 1e-6


def test_the_onnx_schema_documents_the_op_and_every_attribute() -> None:
    op = _weighted_op(doc="x times the sum of weights")
    schema = onnx.defs.get_schema(op.spec.name, 1, "torchtrt_ext")
    assert schema.doc == "x times the sum of weights"
    assert schema.attributes["weights"].description == "the factors whose sum scales x"
    assert all(a.description for a in schema.attributes.values())  # plugin_version and plugin_namespace too


def test_a_gradient_through_an_output_no_input_reaches() -> None:
    """(2x, a float mask of x > 0): the mask has no gradient; summing it into the loss adds nothing, no error."""
    op = define_op(OpSpec(name=f"TestDoubleMask{next(_SERIAL)}", inputs=("x",), outputs=("twice", "mask"), attrs=(),
                          eager=lambda x: (2 * x, (x > 0).to(x.dtype)),
                          shape_rule=lambda shapes, dtypes: [(shapes[0], dtypes[0])] * 2,
                          decompose=lambda d, inputs, outputs: None))
    x = torch.randn(3, 4, requires_grad=True)
    twice, mask = op(x)
    (twice.sum() + mask.sum()).backward()
    assert torch.equal(x.grad, torch.full((3, 4), 2.0))


def test_meta_tensors_take_the_shape_rule_even_where_the_math_reads_values() -> None:
    """x / max|x| reads a value, which a meta tensor (what torch.export and torch.compile trace with) does not have:
    the op's outputs there come from its shape rule, not from running the math."""
    op = define_op(OpSpec(name=f"TestByMax{next(_SERIAL)}", inputs=("x",), outputs=("y",), attrs=(),
                          eager=lambda x: x / float(x.abs().max()),
                          shape_rule=lambda shapes, dtypes: [(shapes[0], dtypes[0])],
                          decompose=lambda d, inputs, outputs: None))
    x = torch.randn(2, 3)
    assert torch.equal(op(x), x / float(x.abs().max()))
    y = op(x.to("meta"))
    assert (y.device.type, y.shape, y.dtype) == ("meta", (2, 3), torch.float32)


def test_shape_inference_keeps_a_named_dim_through_the_rule() -> None:
    """A dim the rule passes through unchanged keeps its name (dim_param) on the op's output."""
    op = _weighted_op()
    helper = onnx.helper
    nodes = [op.spec.make_node(["x"], ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])],
                              [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("torchtrt_ext", 1)])
    inferred = torchtrt_ext.passes.infer_shapes(model)
    (y,) = [v for v in inferred.graph.value_info if v.name == "y"]
    assert [d.dim_param or d.dim_value for d in y.type.tensor_type.shape.dim] == ["batch", 3]
