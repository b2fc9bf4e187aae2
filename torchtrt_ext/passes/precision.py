"""Precision as a graph transformation done before the build (TensorRT 11 and TensorRT-RTX are strongly typed: the
ONNX types decide what runs in which precision).

``apply_precision(model, precision)``:

- ``"as_exported"``: the graph is left as it is;
- ``"fp32"``: every floating-point computation runs in FP32;
- ``"fp16"`` / ``"bf16"``: computations run in that type, except numerically sensitive ones kept in FP32: reductions,
  normalizations, softmax, exp/log/pow-like math that overflows FP16, and every torchtrt_ext node (their accumulation
  is FP32). Graph inputs and outputs keep their exported types (a drop-in module takes and returns what the model
  did), with Casts at the boundary.

How: for each node, the inputs that share the node's output type variable (per the ONNX schema) are its "data"
inputs; they are cast to the node's compute type, and its outputs take that type. Other inputs (shape tensors, Resize
scales, indices) keep their type. An op whose ONNX schema (at the model's opset) does not allow the low type, e.g.
Conv with bfloat16 before opset 22, stays FP32 so the graph remains valid ONNX. Float initializers feeding
low-precision nodes are converted in place instead of cast at run time.

Constants beyond the low type's finite range (an attention mask's ``-1e9`` or ``torch.finfo(torch.float32).min``, a
``x * 1e5`` scale) are never clipped: clipping 1e5 to FP16's 65504 scales by the wrong factor, and
``finfo(float32).min`` rounds to -inf in bfloat16, where ``0 * -inf`` is NaN. A node using such a constant computes in
FP32, and so does every node after it fed by its output, up to an op kept in FP32 anyway (the softmax the mask feeds):
the values a mask or a scale makes stay exact. Infinities are in every type's range and convert as they are.
"""
from __future__ import annotations

import dataclasses
import logging

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper

from torchtrt_ext.errors import InvalidInputError, failure
from torchtrt_ext.passes.onnx_util import (
    FLOAT_TYPES,
    OnnxSource,
    default_opset,
    is_standard_domain,
    read_onnx,
    subgraphs,
)
from torchtrt_ext.passes.shapes import infer_shapes

log = logging.getLogger("torchtrt_ext.backend")  # the build step that runs it logs there

PRECISIONS = ("fp32", "fp16", "bf16", "as_exported")
_ELEM: dict[str, int] = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
_SUFFIX: dict[int, str] = {TensorProto.FLOAT: "fp32", TensorProto.FLOAT16: "fp16", TensorProto.BFLOAT16: "bf16"}
_TYPE_STR: dict[int, str] = {TensorProto.FLOAT: "tensor(float)", TensorProto.FLOAT16: "tensor(float16)",
             TensorProto.BFLOAT16: "tensor(bfloat16)", TensorProto.DOUBLE: "tensor(double)"}
# the largest finite value of each low type (numpy has no bfloat16: (2 - 2**-7) * 2**127)
_FINITE_MAX: dict[int, float] = {TensorProto.FLOAT16: float(np.finfo(np.float16).max),
                                 TensorProto.BFLOAT16: (2 - 2.0 ** -7) * 2.0 ** 127}

# Ops computed in FP32 whatever the precision: accumulations, normalizations, softmax, and range-hungry math.
KEEP_FP32 = frozenset({
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd",
    "ReduceSum", "ReduceSumSquare", "CumSum",
    "Softmax", "LogSoftmax", "Hardmax",
    "LayerNormalization", "GroupNormalization", "InstanceNormalization", "LpNormalization", "RMSNormalization",
    "MeanVarianceNormalization", "LRN", "BatchNormalization",
    "Exp", "Log", "Pow", "Sqrt", "Reciprocal", "Erf",
})


@dataclasses.dataclass
class PrecisionResult:
    model: onnx.ModelProto
    precision: str
    fp32_nodes: list[str]  # names of nodes kept in FP32 (reported; the graph's types keep them so)
    casts_added: int


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise InvalidInputError(failure(f"precision={precision!r} is not supported", f"one of {PRECISIONS}",
                                        "pass precision='fp16' for mixed precision, 'fp32' for full precision"))
    return precision


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    types: dict[str, int] = {}
    graph = model.graph
    for v in list(graph.input) + list(graph.value_info) + list(graph.output):
        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type:
            types[v.name] = v.type.tensor_type.elem_type
    for init in graph.initializer:
        types[init.name] = init.data_type
    return types


def _schema(node: onnx.NodeProto, opset: int) -> onnx.defs.OpSchema | None:
    if not is_standard_domain(node.domain):
        return None
    try:
        return onnx.defs.get_schema(node.op_type, opset, "")
    except Exception:  # noqa: BLE001 - unknown op: treated as opaque
        return None


def _data_positions(node: onnx.NodeProto, schema: onnx.defs.OpSchema, low: int) -> tuple[list[int], list[int]]:
    """(input positions, output positions) that share a type variable allowing ``low`` and the float types."""
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    wanted = {_TYPE_STR[TensorProto.FLOAT], _TYPE_STR[low]}
    outs_vars = [o.type_str for o in schema.outputs]

    def var_at(params: list[onnx.defs.OpSchema.FormalParameter], index: int) -> str | None:
        if not params:
            return None
        p = params[min(index, len(params) - 1)]
        if index >= len(params) and p.option != onnx.defs.OpSchema.FormalParameterOption.Variadic:
            return None
        return p.type_str

    shared = {v for v in outs_vars if v in allowed and wanted <= allowed[v]}
    ins = [i for i in range(len(node.input)) if var_at(list(schema.inputs), i) in shared]
    outs = [i for i in range(len(node.output)) if var_at(list(schema.outputs), i) in shared]
    return ins, outs


def _float_constants(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """Float initializers and Constant-node values by tensor name: converted once to the low type instead of Cast at
    run time (a run-time Cast would also round a tiny eps to zero)."""
    values = {i.name: i for i in graph.initializer if i.data_type in FLOAT_TYPES}
    values.update({n.output[0]: n.attribute[0].t for n in graph.node if n.op_type == "Constant"
                   and [a.name for a in n.attribute] == ["value"] and n.attribute[0].t.data_type in FLOAT_TYPES})
    return values


def _nonzero_float16(array: np.ndarray) -> np.ndarray:
    """``array`` in float16, where a nonzero value below float16's range becomes its smallest subnormal (6e-8) with
    the same sign instead of 0: an eps guarding a division or a root (``x / max(norm, 1e-12)``) must stay nonzero,
    and the error is no larger than rounding to zero would make."""
    low = array.astype(np.float16)
    flushed = (low == 0) & (array != 0)
    low[flushed] = np.copysign(np.float16(2.0 ** -24), array[flushed]).astype(np.float16)
    return low


def _beyond(array: np.ndarray, limit: float) -> bool:
    """Whether a finite value of ``array`` exceeds ``limit`` in magnitude (infinities exist in every float type)."""
    finite = np.abs(array[np.isfinite(array)])
    return bool(finite.max(initial=0.0) > limit)


def _graph_has_subgraphs(node: onnx.NodeProto) -> bool:
    return any(True for _ in subgraphs(node))


def apply_precision(model: OnnxSource, precision: str) -> PrecisionResult:
    """Return a copy of ``model`` (a ModelProto, path or bytes) typed for ``precision`` (see the module docstring)."""
    check_precision(precision)
    model = read_onnx(model)
    if precision == "as_exported":
        return PrecisionResult(model, precision, [], 0)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    retyper = _Retyper(out, _ELEM[precision])
    for node in list(out.graph.node):
        retyper.retype(node)
    retyper.restore_output_types()
    retyper.write_back()
    if retyper.wide_nodes:
        log.info("precision=%s: node(s) %s use constants beyond the %s range and compute in FP32", precision,
                 retyper.wide_nodes[:10], precision)
    log.info("precision=%s: %d cast(s) added, %d node(s) kept in FP32", precision, retyper.casts,
             len(retyper.fp32_nodes))
    return PrecisionResult(out, precision, retyper.fp32_nodes, retyper.casts)


class _Retyper:
    """One pass over a graph (in node order) that gives each node its compute type and records what it changed: the
    new node list, the converted constants, the Casts added, the nodes kept in FP32."""

    def __init__(self, model: onnx.ModelProto, low: int) -> None:
        try:
            inferred = infer_shapes(model)  # passes through torchtrt_ext nodes too
        except Exception:  # noqa: BLE001 - shape inference is best effort; declared types still help
            inferred = model
        self.graph = model.graph
        self.low = low
        self.opset = default_opset(model) or 17  # a model without a default-domain import: schemas at opset 17
        self.original = _elem_types(inferred)  # tensor name -> elem type as exported
        self.current = dict(self.original)  # tensor name -> elem type after the rewrite so far
        self.constants = _float_constants(self.graph)
        self.graph_inputs = {i.name for i in self.graph.input}
        self.cast_names: dict[tuple[str, int], str] = {}
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.fp32_nodes: list[str] = []
        # tensors whose values may lie beyond the low type's finite range: such constants, and what nodes computing
        # from them make (up to an op kept in FP32 anyway)
        limit = _FINITE_MAX[low] if low in _FINITE_MAX else float("inf")
        self.wide = {name for name, t in self.constants.items() if _beyond(numpy_helper.to_array(t), limit)}
        self.wide_nodes: list[str] = []
        self.casts = 0

    def retype(self, node: onnx.NodeProto) -> None:
        """Give ``node`` its compute type: cast its data inputs to it, its other inputs back to their exported
        types, and record the type of its outputs."""
        schema = _schema(node, self.opset)
        if schema is None or _graph_has_subgraphs(node) or node.op_type == "Cast":
            self._keep_exported(node)
            return
        ins, outs = _data_positions(node, schema, self.low)
        if not any(self.current.get(node.input[i]) in FLOAT_TYPES for i in ins):
            for i in range(len(node.input)):  # e.g. Shape, Gather of ints: nothing to decide
                if i not in ins:
                    self._restore_input(node, i)
            self._outputs_as_exported(node)
            self.nodes.append(node)
            return
        compute = TensorProto.FLOAT if node.op_type in KEEP_FP32 else self.low
        if compute != TensorProto.FLOAT and any(node.input[i] in self.wide for i in ins):
            compute = TensorProto.FLOAT
            self.wide_nodes.append(node.name)
            self.wide.update(node.output)
        if compute == TensorProto.FLOAT and self.low != TensorProto.FLOAT:
            self.fp32_nodes.append(node.name)
        for i, name in enumerate(node.input):
            if i in ins:
                node.input[i] = self.cast_to(name, compute)
            else:
                self._restore_input(node, i)
        for j, name in enumerate(node.output):
            if j in outs and self.original.get(name, TensorProto.FLOAT) in FLOAT_TYPES:
                self.current[name] = compute
            elif name in self.original:
                self.current[name] = self.original[name]
        self.nodes.append(node)

    def _keep_exported(self, node: onnx.NodeProto) -> None:
        """Opaque nodes (custom ops, control flow) and Cast itself: inputs back to their exported types, outputs as
        exported; custom torchtrt_ext ops therefore keep their FP32 math."""
        for i, name in enumerate(node.input):
            if name in self.original:
                node.input[i] = self.cast_to(name, self.original[name])
        if not is_standard_domain(node.domain) or _graph_has_subgraphs(node):
            self.fp32_nodes.append(node.name)
        self._outputs_as_exported(node)
        self.nodes.append(node)

    def _restore_input(self, node: onnx.NodeProto, i: int) -> None:
        """Input ``i`` of ``node`` back in its exported type where the rewrite changed it (a shape tensor, an index)."""
        name = node.input[i]
        if name in self.original and self.current.get(name) != self.original[name]:
            node.input[i] = self.cast_to(name, self.original[name])

    def _outputs_as_exported(self, node: onnx.NodeProto) -> None:
        for name in node.output:
            if name in self.original:
                self.current[name] = self.original[name]

    def cast_to(self, name: str, elem: int) -> str:
        """The name of tensor ``name`` in type ``elem``: itself, a converted constant, or the output of a Cast (each
        made once)."""
        if not name or self.current.get(name) == elem or self.current.get(name) not in FLOAT_TYPES:
            return name
        key = (name, elem)
        if key in self.cast_names:
            return self.cast_names[key]
        new_name = f"{name}__{_SUFFIX[elem]}"
        if name in self.constants and name not in self.graph_inputs:
            self.initializers.append(self._converted(name, elem, new_name))
        else:
            self.nodes.append(helper.make_node("Cast", [name], [new_name], to=elem, name=f"{new_name}_cast"))
            self.casts += 1
        self.current[new_name] = elem
        self.cast_names[key] = new_name
        return new_name

    def _converted(self, name: str, elem: int, new_name: str) -> onnx.TensorProto:
        """The constant ``name`` converted to ``elem`` once, instead of a Cast at run time (within ``elem``'s range:
        a node using a constant beyond it computes in FP32)."""
        array: npt.NDArray[np.float32] = numpy_helper.to_array(self.constants[name]).astype(np.float32)
        if elem == TensorProto.FLOAT16:
            return numpy_helper.from_array(_nonzero_float16(array), new_name)
        if elem == TensorProto.BFLOAT16:
            return helper.make_tensor(new_name, TensorProto.BFLOAT16, array.shape, array.flatten().tolist())
        return numpy_helper.from_array(array, new_name)

    def restore_output_types(self) -> None:
        """Graph outputs keep their exported types: rename the producer's tensor and cast back into the declared
        name."""
        for output in self.graph.output:
            declared = output.type.tensor_type.elem_type
            if declared not in FLOAT_TYPES or self.current.get(output.name) in (None, declared):
                continue
            inner = f"{output.name}__{_SUFFIX.get(self.current[output.name], 'lowp')}"
            for node in self.nodes:
                for k, name in enumerate(node.output):
                    if name == output.name:
                        node.output[k] = inner
                for k, name in enumerate(node.input):
                    if name == output.name:
                        node.input[k] = inner
            self.nodes.append(helper.make_node("Cast", [inner], [output.name], to=declared,
                                               name=f"{output.name}_output_cast"))
            self.casts += 1

    def write_back(self) -> None:
        """Replace the graph's nodes, add the converted constants, drop the initializers nothing uses any more and
        the value_info whose types are stale (TensorRT and shape inference recompute them)."""
        graph = self.graph
        del graph.node[:]
        graph.node.extend(self.nodes)
        graph.initializer.extend(self.initializers)
        del graph.value_info[:]
        used = {name for n in graph.node for name in n.input} | {o.name for o in graph.output}
        kept = [i for i in graph.initializer if i.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
