"""Fuse the ONNX spellings of L2 normalization over one axis into one torchtrt_ext ``L2Norm`` node.

The L2Norm op computes ``y = x / max(||x||_2 over axis, eps)`` (``F.normalize`` semantics). Recognized graphs,
as the legacy (TorchScript) and dynamo exporters emit them at opsets 17-21 (``x`` is the same tensor throughout):

- ``x / x.norm(dim, keepdim=True)``, ``x / torch.linalg.vector_norm(...)``: ReduceL2 -> Div (eps: no clamp, below)
- ``F.normalize(x, dim=d, eps=e)``: ReduceL2 -> Clip(min=e) -> Expand -> Div (eps = e)
- ``x / x.norm(...).clamp(min=e)``, ``torch.maximum(norm, e)``: ReduceL2 -> Clip(min=e) | Max(e) -> Div (eps = e)
- ``x / (x*x).sum(d, keepdim=True).sqrt()``: Mul(x,x) | Pow(x,2) -> ReduceSum -> Sqrt -> Div (no clamp)
- ``x * torch.rsqrt((x*x).sum(d, keepdim=True))``: ... -> ReduceSum -> Sqrt -> Reciprocal | Div(1, .) -> Mul (no clamp)
- ``x * torch.rsqrt(s.clamp(min=e*e))``: ... -> ReduceSum -> Clip(min=e*e) -> Sqrt -> ... (eps = sqrt(e*e) = e)

Also accepted on the way: Cast nodes to a float type around the reduction (the dynamo exporter upcasts FP16 sums to
FP32; L2Norm accumulates in FP32 anyway), ReduceSumSquare for the sum of squares, an Expand whose target shape is
provably ``x``'s own shape (``Shape(x)``, constants equal to ``x``'s static dims, or a Concat of those), and an
``Add(sum, 0)``.

Semantics kept, and where they are not:

* An explicit clamp ``max(norm, e)`` (or ``max(sum, e*e)`` under the root) becomes ``eps = e``.
* No clamp at all (``x / x.norm(...)``): L2Norm needs ``eps > 0``, so the fused node gets ``eps`` = the smallest
  normal float32 (about 1.18e-38). Every vector whose computed norm is a normal float32 (every non-zero FP16/BF16
  vector; FP32 vectors unless the sum of squares underflows) is normalized exactly as before; a vector whose norm is 0
  gives 0 instead of the original 0/0 = NaN (or x/0 = inf). That is the one deliberate difference, the safer output.
  An FP16 ``F.normalize`` exports its default eps 1e-12 rounded to 0 in FP16, so it is this case too.
* ``x / sqrt(sum(x*x) + e)`` with ``e != 0`` adds eps *inside* the root; that is not ``max(norm, e)`` and
  L2Norm has no attribute for it, so it is left unfused and reported as a near miss.

Never fused (reported as near misses when the rest of the chain is an L2 normalization): a reduction over several or
all axes, ``keepdims=0``, an intermediate tensor (norm, clamp, sum, square...) with another consumer or that is a
graph output, a numerator that is not the normalized tensor, a clamp with an upper bound, an Expand whose target
cannot be proven to be ``x``'s shape, an input L2Norm does not take (float64, rank < 2). p != 2 norms (ReduceL1,
Pow(x, 3)...) never start a match, and a norm that goes through other ops (Unsqueeze after keepdim=False, an Add of
eps to the norm) is simply not matched.

onnx-graphsurgeon finds the patterns; the rewrite is then applied to a copy of the ModelProto (each matched chain
replaced by its L2Norm node in place, then the constants and shape nodes only it used removed), not by re-exporting
the gs graph: a gs round trip drops node ``metadata_props`` (the dynamo exporter's source locations), input metadata
and some value_info, and the issue asks that everything but the fused chains stays exactly as exported.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Iterable

import numpy as np
import onnx
import onnx_graphsurgeon as gs

from torchtrt_ext.ops.spec import DOMAIN, DOMAIN_VERSION
from torchtrt_ext.ops.l2norm import SPEC as L2NORM_SPEC
from torchtrt_ext.passes.onnx_util import FLOAT_TYPES, OnnxSource, is_standard_domain, read_onnx

LOGGER = logging.getLogger("torchtrt_ext")

NO_CLAMP_EPS = float(np.finfo(np.float32).tiny)
"""eps given to a fused normalization that had no clamp: the smallest normal float32 (see module doc)."""

_L2NORM_DTYPES = tuple(str(d).removeprefix("torch.") for d in L2NORM_SPEC.dtypes)  # the op's type constraint
_REDUCTIONS = ("ReduceL2", "ReduceSumSquare", "ReduceSum")


@dataclasses.dataclass(frozen=True)
class FusedL2Norm:
    """One fused normalization: the new node, its attributes, and the nodes it replaced (in graph order)."""

    name: str
    axis: int
    eps: float
    spelling: str
    replaced: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class UnfusedL2Norm:
    """An L2 normalization deliberately left as it was, and why."""

    node: str
    spelling: str
    reasons: tuple[str, ...]


@dataclasses.dataclass
class L2NormFusionReport:
    """What ``fuse_l2norm`` did: the fused normalizations and the near misses it left alone."""

    fused: list[FusedL2Norm] = dataclasses.field(default_factory=list)
    unfused: list[UnfusedL2Norm] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """One line per fact, for logs."""
        lines = [f"fused {len(self.fused)} L2 normalizations" + (
            ": " + ", ".join(f"{f.name} ({f.spelling}, axis={f.axis}, eps={f.eps:g})" for f in self.fused)
            if self.fused else "")]
        lines += [f"left unfused {u.node} ({u.spelling}): {'; '.join(u.reasons)}" for u in self.unfused]
        return "\n".join(lines)


@dataclasses.dataclass
class _Match:
    reduction: gs.Node
    x: gs.Tensor | None = None
    final: gs.Node | None = None
    nodes: list[gs.Node] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    axis: int | None = None
    eps_norm: float | None = None  # clamp of the norm
    eps_sum: float | None = None  # clamp of the sum of squares (eps squared)

    order: dict[int, int] = dataclasses.field(default_factory=dict)  # node id -> position in the graph

    def sorted_nodes(self) -> list[gs.Node]:
        """The matched nodes in graph order."""
        return sorted(self.nodes, key=lambda n: self.order.get(id(n), 0))

    @property
    def spelling(self) -> str:
        """The matched ops in graph order, e.g. 'ReduceL2 -> Clip -> Expand -> Div'."""
        return " -> ".join(n.op for n in self.sorted_nodes())

    @property
    def eps(self) -> float:
        candidates = [e for e in (self.eps_norm, None if self.eps_sum is None else math.sqrt(self.eps_sum))
                      if e is not None]
        eps = max(candidates, default=0.0)
        return eps if eps > 0 else NO_CLAMP_EPS


class _GraphView:
    """Read-only helpers over a gs.Graph: constants, producers, consumers, graph outputs."""

    def __init__(self, graph: gs.Graph) -> None:
        self.outputs = {id(t) for t in graph.outputs}
        self.order = {id(n): i for i, n in enumerate(graph.nodes)}

    @staticmethod
    def producer(tensor: gs.Tensor) -> gs.Node | None:
        return tensor.inputs[0] if len(tensor.inputs) == 1 else None

    def constant(self, tensor: gs.Tensor) -> np.ndarray | None:
        """The value of a constant tensor (initializer or Constant node output), else None."""
        if isinstance(tensor, gs.Constant):
            return np.asarray(tensor.values)
        node = self.producer(tensor)
        if node is None or node.op != "Constant":
            return None
        for key, value in node.attrs.items():
            if key == "value" and isinstance(value, gs.Constant):
                return np.asarray(value.values)
            if key in ("value_float", "value_floats", "value_int", "value_ints"):
                return np.asarray(value)
        return None

    def scalar(self, tensor: gs.Tensor) -> float | None:
        """A constant holding one number (any shape of size 1), as a float; else None."""
        value = self.constant(tensor)
        if value is None or value.size != 1:
            return None
        return float(value.reshape(-1)[0])

    def sole_use(self, tensor: gs.Tensor, match: _Match, accept: Iterable[str]) -> gs.Node | None:
        """The consumer of ``tensor`` whose op is in ``accept``; records a problem if the tensor has other uses."""
        accept = set(accept)
        consumers = list(tensor.outputs)
        chosen = next((n for n in consumers if n.op in accept), None)
        others = [n for n in consumers if n is not chosen]
        if chosen is not None and others:
            match.problems.append(f"{tensor.name!r} is also used by {', '.join(_label(n) for n in others)}")
        if chosen is not None and id(tensor) in self.outputs:
            match.problems.append(f"{tensor.name!r} is also a graph output")
        return chosen

    def through_casts_down(self, tensor: gs.Tensor, match: _Match) -> gs.Tensor:
        """Follow single Cast-to-float consumers of ``tensor``; returns the last tensor."""
        while len(tensor.outputs) == 1 and _is_float_cast(tensor.outputs[0]) and id(tensor) not in self.outputs:
            cast = tensor.outputs[0]
            match.nodes.append(cast)
            tensor = cast.outputs[0]
        return tensor

    def through_casts_up(self, tensor: gs.Tensor, match: _Match) -> gs.Tensor:
        """Follow Cast-to-float producers of ``tensor`` upwards (each cast output used once)."""
        node = self.producer(tensor)
        while node is not None and _is_float_cast(node):
            if len(tensor.outputs) != 1 or id(tensor) in self.outputs:
                match.problems.append(f"{tensor.name!r} has other uses")
            match.nodes.append(node)
            tensor = node.inputs[0]
            node = self.producer(tensor)
        return tensor


def _label(node: gs.Node) -> str:
    return f"{node.op} {node.name!r}" if node.name else node.op


def _is_float_cast(node: gs.Node) -> bool:
    return node.op == "Cast" and node.attrs.get("to") in FLOAT_TYPES


def _reduce_axes(view: _GraphView, node: gs.Node) -> list[int] | None:
    """The reduced axes ([] = all); None when they are not constant."""
    if "axes" in node.attrs:
        return [int(a) for a in node.attrs["axes"]]
    if len(node.inputs) > 1 and node.inputs[1].name:
        value = view.constant(node.inputs[1])
        return None if value is None else [int(a) for a in value.reshape(-1)]
    return []


def _check_reduction(view: _GraphView, node: gs.Node, match: _Match) -> None:
    axes = _reduce_axes(view, node)
    if axes is None:
        match.problems.append(f"{_label(node)} reduces over axes computed at run time")
    elif not axes:
        if node.attrs.get("noop_with_empty_axes", 0):
            match.problems.append(f"{_label(node)} reduces nothing (noop_with_empty_axes)")
        else:
            match.problems.append(f"{_label(node)} reduces over all axes, not one")
    elif len(set(axes)) != 1:
        match.problems.append(f"{_label(node)} reduces over {len(axes)} axes {axes}, not one")
    else:
        match.axis = axes[0]
    if int(node.attrs.get("keepdims", 1)) != 1:
        match.problems.append(f"{_label(node)} drops the reduced axis (keepdims=0)")


def _square_source(view: _GraphView, node: gs.Node | None) -> gs.Tensor | None:
    """``x`` when ``node`` computes x*x or x**2, else None."""
    if node is None:
        return None
    if node.op == "Mul" and len(node.inputs) == 2 and node.inputs[0] is node.inputs[1]:
        return node.inputs[0]
    if node.op == "Pow" and view.scalar(node.inputs[1]) == 2.0:
        return node.inputs[0]
    return None


def _clamp_min(view: _GraphView, node: gs.Node, tensor: gs.Tensor, match: _Match) -> float | None:
    """The lower bound of a Clip/Max clamp of ``tensor``; None when it is not a constant lower clamp."""
    if node.op == "Clip":
        if node.inputs[0] is not tensor or len(node.inputs) < 2 or not node.inputs[1].name:
            return None
        low = view.scalar(node.inputs[1])
        if len(node.inputs) > 2 and node.inputs[2].name:
            high = view.scalar(node.inputs[2])
            if high is None or high != math.inf:
                match.problems.append(f"{_label(node)} also clamps from above")
        return low
    if node.op == "Max" and len(node.inputs) == 2:
        other = node.inputs[1] if node.inputs[0] is tensor else node.inputs[0]
        return view.scalar(other)
    return None


def _shape_symbols(view: _GraphView, tensor: gs.Tensor, depth: int = 0) -> list[_Dim] | None:
    """The value of a 1-D shape tensor as ints and symbols ``(tensor name, dim)``; None when not provable."""
    value = view.constant(tensor)
    if value is not None:
        return [int(v) for v in value.reshape(-1)]
    node = view.producer(tensor)
    if node is None or depth > 8:
        return None
    if node.op == "Shape":
        dims = _dims(node.inputs[0])
        if dims is None:
            return None
        start, end = node.attrs.get("start", 0), node.attrs.get("end", len(dims))
        return dims[slice(start, end)]
    if node.op == "Concat" and node.attrs.get("axis", 0) in (0, -1):
        parts = [_shape_symbols(view, t, depth + 1) for t in node.inputs]
        known = [p for p in parts if p is not None]
        return None if len(known) != len(parts) else [s for p in known for s in p]
    return None


_Dim = int | str | tuple[str, int]  # a static dim, a dim_param, or (tensor name, axis) for an unnamed dynamic one


def _dims(tensor: gs.Tensor) -> list[_Dim] | None:
    """``tensor``'s dims: ints where static, else a symbol equal only to the same dim of the same tensor/param."""
    if tensor.shape is None:
        return None
    return [d if isinstance(d, int) and d >= 0 else (d if isinstance(d, str) and d else (tensor.name, i))
            for i, d in enumerate(tensor.shape)]


def _expand_keeps_shape(view: _GraphView, node: gs.Node, x: gs.Tensor) -> bool:
    """Whether Expand's target broadcasts to exactly ``x``'s shape (so ``x / Expand(n)`` == ``x / n``)."""
    shape_of = view.producer(node.inputs[1])
    if (shape_of is not None and shape_of.op == "Shape" and shape_of.inputs[0] is x
            and shape_of.attrs.get("start", 0) == 0 and shape_of.attrs.get("end") is None):
        return True  # Shape(x) itself, whatever x's rank (the legacy exporter's F.normalize)
    target = _shape_symbols(view, node.inputs[1])
    dims = _dims(x)
    if target is None or dims is None or len(target) > len(dims):
        return False
    return all(t == 1 or t == d for t, d in zip(reversed(target), reversed(dims)))


def _walk(view: _GraphView, reduction: gs.Node) -> _Match | None:
    """Follow one reduction to the Div/Mul that normalizes with it; None when it is not an L2 normalization."""
    match = _Match(reduction, nodes=[reduction], order=view.order)
    if reduction.op in ("ReduceL2", "ReduceSumSquare"):
        match.x = reduction.inputs[0]
    else:  # ReduceSum of a square, possibly through casts
        source = view.through_casts_up(reduction.inputs[0], match)
        square = view.producer(source)
        match.x = _square_source(view, square)
        if match.x is None:
            return None
        if len(source.outputs) != 1 or id(source) in view.outputs:
            match.problems.append(f"{source.name!r} (the squares) has other uses")
        match.nodes.append(square)
    _check_reduction(view, reduction, match)
    tensor = view.through_casts_down(reduction.outputs[0], match)

    if reduction.op != "ReduceL2":  # a sum of squares: optional clamp or +0, then Sqrt
        node = view.sole_use(tensor, match, ("Sqrt", "Clip", "Max", "Add"))
        if node is None:
            return None
        if node.op in ("Clip", "Max"):
            match.eps_sum = _clamp_min(view, node, tensor, match)
            if match.eps_sum is None:
                return None
        elif node.op == "Add":
            added = view.scalar(node.inputs[1] if node.inputs[0] is tensor else node.inputs[0])
            if added is None:
                return None
            if added != 0.0:
                match.problems.append(
                    f"eps={added:g} is added inside the square root (sqrt(sum(x*x) + eps)), while L2Norm clamps the "
                    "norm (max(||x||, eps)); the results differ, so it stays as exported")
        if node.op != "Sqrt":
            match.nodes.append(node)
            tensor = view.through_casts_down(node.outputs[0], match)
            node = view.sole_use(tensor, match, ("Sqrt",))
            if node is None:
                return None
        match.nodes.append(node)
        tensor = view.through_casts_down(node.outputs[0], match)

    # the norm: optional clamp, optional Expand, then x / norm or x * (1 / norm)
    node = view.sole_use(tensor, match, ("Clip", "Max", "Expand", "Div", "Reciprocal"))
    if node is not None and node.op in ("Clip", "Max"):
        match.eps_norm = _clamp_min(view, node, tensor, match)
        if match.eps_norm is None:
            return None
        match.nodes.append(node)
        tensor = view.through_casts_down(node.outputs[0], match)
        node = view.sole_use(tensor, match, ("Expand", "Div", "Reciprocal"))
    node, tensor = _through_expand(view, node, tensor, match, ("Div", "Reciprocal"))
    if node is None:
        return None
    if node.op == "Div" and node.inputs[1] is tensor and node.inputs[0] is not tensor:
        one = view.scalar(node.inputs[0])
        if one != 1.0:  # x / norm
            return _finish(match, node, numerator=node.inputs[0])
    elif node.op != "Reciprocal":
        return None
    match.nodes.append(node)  # 1 / norm, then x * it
    tensor = node.outputs[0]
    node = view.sole_use(tensor, match, ("Mul", "Expand"))
    node, tensor = _through_expand(view, node, tensor, match, ("Mul",))
    if node is None or node.op != "Mul" or len(node.inputs) != 2:
        return None
    numerator = node.inputs[1] if node.inputs[0] is tensor else node.inputs[0]
    return _finish(match, node, numerator)


def _through_expand(view: _GraphView, node: gs.Node | None, tensor: gs.Tensor, match: _Match,
                    accept: tuple[str, ...]) -> tuple[gs.Node | None, gs.Tensor]:
    if node is None or node.op != "Expand":
        return node, tensor
    assert match.x is not None  # _walk sets it before following the chain
    if not _expand_keeps_shape(view, node, match.x):
        match.problems.append(f"{_label(node)} expands to a shape not proven equal to {match.x.name!r}'s")
    match.nodes.append(node)
    tensor = node.outputs[0]
    return view.sole_use(tensor, match, accept), tensor


def _finish(match: _Match, final: gs.Node, numerator: gs.Tensor) -> _Match:
    match.nodes.append(final)
    match.final = final
    x = match.x
    assert x is not None  # _walk sets it before following the chain
    dtype = getattr(x, "dtype", None)
    if dtype is not None and not any(name in str(dtype) for name in _L2NORM_DTYPES):
        match.problems.append(f"{x.name!r} is {dtype}; L2Norm takes {', '.join(_L2NORM_DTYPES)}")
    if x.shape is not None and len(x.shape) < 2:
        match.problems.append(f"{x.name!r} has rank {len(x.shape)}; L2Norm needs rank >= 2")
    if numerator is not x:
        match.problems.append(f"{_label(final)} normalizes {numerator.name!r}, not the reduced tensor {x.name!r}")
    return match


def _fresh_name(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _normalized_axis(axis: int, x: gs.Tensor) -> int:
    return axis % len(x.shape) if x.shape is not None and axis < 0 else axis


def _make_node(match: _Match, name: str, output: str) -> onnx.NodeProto:
    """The L2Norm node, built by the op's own spec (attribute names, checks, plugin fields)."""
    assert match.x is not None and match.axis is not None  # a match without problems has both
    return L2NORM_SPEC.make_node([match.x.name], [output], name=name,
                                           axis=_normalized_axis(match.axis, match.x), eps=match.eps)


def _used_names(nodes: Iterable[onnx.NodeProto]) -> set[str]:
    """Every tensor name read by ``nodes`` or by their subgraphs (which may read outer-scope names)."""
    used: set[str] = set()
    for node in nodes:
        used.update(name for name in node.input if name)
        for attribute in node.attribute:
            for sub in list(attribute.graphs) + ([attribute.g] if attribute.HasField("g") else []):
                used |= _used_names(sub.node)
    return used


def _rewrite(model: onnx.ModelProto, replace: dict[int, onnx.NodeProto], remove: set[int]) -> onnx.ModelProto:
    """A copy of ``model`` with node ``i`` replaced by ``replace[i]`` and nodes ``remove`` dropped, then whatever
    only they used (Constant/Shape/Concat producers, initializers, value_info) dropped too. Nothing else changes:
    no re-export, so node metadata (the dynamo exporter's source locations), value_info and order are kept.
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    kept = [replace.get(i, node) for i, node in enumerate(graph.node) if i not in remove or i in replace]
    removed_inputs = {name for i, node in enumerate(graph.node) if i in remove for name in node.input}
    outputs = {o.name for o in graph.output}
    while True:  # producers that the removed nodes alone used
        used = _used_names(kept) | outputs
        dead = [n for n in kept if n.output and not any(o in used for o in n.output)
                and any(o in removed_inputs for o in n.output)]
        if not dead:
            break
        removed_inputs |= {name for n in dead for name in n.input}
        kept = [n for n in kept if all(n is not d for d in dead)]
    used = _used_names(kept) | outputs
    produced = {o for n in kept for o in n.output} | {i.name for i in graph.input}
    initializers = [t for t in graph.initializer if t.name in used or t.name not in removed_inputs]
    value_info = [v for v in graph.value_info if v.name in produced or v.name in {t.name for t in initializers}]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    del graph.value_info[:]
    graph.value_info.extend(value_info)
    if not any(entry.domain == DOMAIN for entry in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid(DOMAIN, DOMAIN_VERSION))
    return out


def find_l2norms(graph: gs.Graph) -> tuple[list[_Match], list[UnfusedL2Norm]]:
    """The fusable normalizations of ``graph`` and the near misses (nothing is changed)."""
    view = _GraphView(graph)
    fusable: list[_Match] = []
    unfused: list[UnfusedL2Norm] = []
    claimed: set[int] = set()
    for node in list(graph.nodes):
        if node.op not in _REDUCTIONS or not is_standard_domain(node.domain):
            continue
        match = _walk(view, node)
        if match is None:
            continue
        if any(id(n) in claimed for n in match.nodes):
            match.problems.append("shares nodes with another fused normalization")
        if match.problems:
            unfused.append(UnfusedL2Norm(node.name, match.spelling, tuple(match.problems)))
            continue
        claimed.update(id(n) for n in match.nodes)
        fusable.append(match)
    return fusable, unfused


def fuse_l2norm_with_report(model: OnnxSource) -> tuple[onnx.ModelProto, L2NormFusionReport]:
    """``fuse_l2norm``, also returning what was fused and what was deliberately left alone."""
    model = read_onnx(model)
    graph = gs.import_onnx(model)
    matches, unfused = find_l2norms(graph)
    report = L2NormFusionReport(unfused=unfused)
    if not matches:
        out = onnx.ModelProto()
        out.CopyFrom(model)
        return out, report
    taken = {n.name for n in graph.nodes if n.name}
    replace: dict[int, onnx.NodeProto] = {}
    remove: set[int] = set()
    for match in matches:
        assert match.final is not None  # every match ends at its final node (_finish)
        name = _fresh_name(f"{match.final.name or match.reduction.name or 'node'}/L2Norm", taken)
        node = _make_node(match, name, match.final.outputs[0].name)
        replace[match.order[id(match.final)]] = node  # x exists before the chain, so the final node's place is valid
        remove |= {match.order[id(n)] for n in match.nodes}
        values = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        report.fused.append(FusedL2Norm(name, int(values["axis"]), float(values["eps"]), match.spelling,
                                        tuple(n.name for n in match.sorted_nodes())))
    return _rewrite(model, replace, remove), report


def fuse_l2norm(model: OnnxSource) -> onnx.ModelProto:
    """Rewrite every L2 normalization over one axis of ``model`` (a ModelProto, path or bytes) into one torchtrt_ext
    L2Norm node; returns a new model.

    Logs what was fused, and each near miss left unfused with its reason, to the ``torchtrt_ext`` logger
    (INFO). Use ``fuse_l2norm_with_report`` to get that as data. See the module doc for the spellings.
    """
    out, report = fuse_l2norm_with_report(model)
    LOGGER.info("%s", report.summary())
    return out
