"""The op-definition machinery: one ``OpSpec`` gives every layer of a custom op.

From a single definition, ``define_op`` produces

* the eager function (PyTorch math on any device, autograd through recomputation, an optional CUDA kernel),
* the legacy TorchScript exporter path (a ``torch.autograd.Function`` whose ``symbolic`` emits the node),
* the dynamo exporter path (a ``torch.library`` op, an ONNX schema and an onnxscript translation),
* the decomposition into standard ONNX ops (``passes.decompose_custom_ops``),
* the output shape and dtype rule (the fake kernel, and ONNX value_info through ``passes.infer_shapes``),
* the attribute schema (names, types, defaults, validation) shared with the plugins,
* the plugin binding (``PluginRef``: which TensorRT plugin creator serves the op, and who provides it) and the
  raw-buffer launcher that both the eager CUDA path and the Python plugin call.

Every node follows DESIGN.md §3: domain ``torchtrt_ext``, op_type = plugin name, the attributes, and
``plugin_version`` / ``plugin_namespace`` so TensorRT's ONNX parser finds the plugin creator.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
import torch
from onnx import helper

from torchtrt_ext.errors import (
    InvalidAttributeError,
    InvalidInputError,
    LibraryNotFoundError,
    OpDefinitionError,
    UnknownOpError,
    failure,
)

DOMAIN = "torchtrt_ext"
DOMAIN_VERSION = 1
PROVIDER_OURS = "torchtrt_ext"  # libtorchtrt_ext_plugins.so, or the Python plugins where it is not built
PROVIDER_TENSORRT = "tensorrt"  # TensorRT's own plugin library (libnvinfer_plugin), e.g. EfficientNMS_TRT
PROVIDERS = (PROVIDER_OURS, PROVIDER_TENSORRT)
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_REQUIRED = object()

# attribute kind -> (python types accepted, torch schema type, ONNX attribute type, legacy g.op suffix)
_KINDS: dict[str, tuple[tuple[type, ...], str, Any, str]] = {
    "int": ((int,), "int", onnx.defs.OpSchema.AttrType.INT, "i"),
    "float": ((float, int), "float", onnx.defs.OpSchema.AttrType.FLOAT, "f"),
    "ints": ((list, tuple), "int[]", onnx.defs.OpSchema.AttrType.INTS, "i"),
    "floats": ((list, tuple), "float[]", onnx.defs.OpSchema.AttrType.FLOATS, "f"),
    "str": ((str,), "str", onnx.defs.OpSchema.AttrType.STRING, "s"),
}
_ONNX_TYPES = {torch.float32: "tensor(float)", torch.float16: "tensor(float16)", torch.bfloat16: "tensor(bfloat16)",
               torch.float64: "tensor(double)", torch.int64: "tensor(int64)", torch.int32: "tensor(int32)",
               torch.bool: "tensor(bool)"}
_TORCH_FROM_ONNX = {onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.FLOAT16: torch.float16,
                    onnx.TensorProto.BFLOAT16: torch.bfloat16, onnx.TensorProto.DOUBLE: torch.float64,
                    onnx.TensorProto.INT64: torch.int64, onnx.TensorProto.INT32: torch.int32,
                    onnx.TensorProto.BOOL: torch.bool}
_ONNX_FROM_TORCH = {v: k for k, v in _TORCH_FROM_ONNX.items()}


@dataclasses.dataclass(frozen=True)
class Attr:
    """One op attribute: ONNX/plugin field name, kind ('int', 'float', 'ints', 'floats', 'str'), default, rule.

    ``check`` returns True for allowed values; ``allowed`` describes them for error messages; ``arg`` is the
    Python argument name users pass it as, when it differs from the field name (``dim`` for ``axis``).
    """

    name: str
    kind: str
    default: Any = _REQUIRED
    doc: str = ""
    check: Callable[[Any], bool] | None = None
    allowed: str = ""
    arg: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise OpDefinitionError(f"attribute {self.name!r}: kind {self.kind!r} is not one of {sorted(_KINDS)}")

    @property
    def required(self) -> bool:
        """Whether the attribute has no default."""
        return self.default is _REQUIRED

    @property
    def label(self) -> str:
        """How error messages name it: the Python argument, with the field name when they differ."""
        return self.name if self.arg in (None, self.name) else f"{self.arg} (ONNX attribute {self.name!r})"

    def validate(self, op: str, value: Any) -> Any:
        """Return the value coerced to its kind, or raise InvalidAttributeError naming the argument."""
        accepted = _KINDS[self.kind][0]
        if isinstance(value, bool) or not isinstance(value, accepted):
            raise InvalidAttributeError(
                f"{op}: argument {self.label} must be of type {self.kind}, got {type(value).__name__} {value!r}."
                + (f" Allowed: {self.allowed}." if self.allowed else ""))
        if self.kind == "float":
            value = float(value)
        elif self.kind in ("ints", "floats"):
            elem = int if self.kind == "ints" else float
            if any(isinstance(v, bool) or not isinstance(v, (int, float) if elem is float else int) for v in value):
                raise InvalidAttributeError(f"{op}: argument {self.label} must be a list of {elem.__name__}, got {value!r}")
            value = tuple(elem(v) for v in value)
        if self.kind in ("float", "floats"):
            _check_float32(op, self.label, value)
        if self.check is not None and not self.check(value):
            raise InvalidAttributeError(f"{op}: argument {self.label}={value!r} is not allowed. Allowed: {self.allowed}.")
        return value


_FLOAT32_TO_INF = 2.0**128 - 2.0**103  # the smallest magnitude float32 rounds to inf (float32's max + half an ulp)
_FLOAT32_TO_ZERO = 2.0**-150  # the largest magnitude float32 rounds to 0 (half its smallest subnormal, a tie to even)


def _check_float32(op: str, label: str, value: float | tuple[float, ...]) -> None:
    """ONNX and TensorRT keep float attributes as float32: refuse a value float32 turns into 0 or inf.

    Plain float arithmetic, no numpy: torch.compile traces the op's checks, and dynamo cannot trace numpy's errstate.
    """
    for v in (value,) if isinstance(value, float) else value:
        if math.isfinite(v) and (abs(v) >= _FLOAT32_TO_INF or 0 < abs(v) <= _FLOAT32_TO_ZERO):
            as32 = math.copysign(math.inf if abs(v) >= _FLOAT32_TO_INF else 0.0, v)
            raise InvalidAttributeError(
                f"{op}: argument {label}={v!r} does not survive float32, the type ONNX and TensorRT store float "
                f"attributes in: it would become {as32!r}. Remedy: pass a value between 1.4e-45 and 3.4e38 in "
                "magnitude (or 0)")


def finite_positive(value: float) -> bool:
    """Attribute check: a finite number > 0 (an eps)."""
    return math.isfinite(value) and value > 0


@dataclasses.dataclass
class Decomposer:
    """Builds the standard-ONNX nodes that replace one custom node (see ``OpSpec.decompose``)."""

    opset: int
    prefix: str
    nodes: list[onnx.NodeProto] = dataclasses.field(default_factory=list)
    _count: int = 0

    def _fresh(self) -> str:
        self._count += 1
        return f"{self.prefix}/_{self._count}"

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        """Append one single-output node and return its output name (``out`` when given)."""
        return self.op_outputs(op_type, *inputs, count=1, outs=None if out is None else [out], **attrs)[0]

    def op_outputs(self, op_type: str, *inputs: str, count: int, outs: Sequence[str] | None = None,
                   **attrs: Any) -> list[str]:
        """Append one node with ``count`` outputs (named ``outs`` when given) and return their names."""
        outputs = list(outs) if outs is not None else [self._fresh() for _ in range(count)]
        name = f"{self.prefix}/{op_type}{self._fresh().rsplit('/', 1)[1]}"
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=name, **attrs))
        return outputs

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        """A Constant node holding ``value`` (scalar or array) as ``dtype``; returns its output name."""
        array = np.asarray(value, dtype=dtype)
        return self.op("Constant", value=onnx.numpy_helper.from_array(array, name=self._fresh()))

    def reduce(self, op_type: str, x: str, axes: Sequence[int], keepdims: bool = True, out: str | None = None) -> str:
        """A Reduce* node over ``axes``, as an attribute before opset 18 (13 for ReduceSum) and an input after."""
        axes_as_input = self.opset >= (13 if op_type == "ReduceSum" else 18)
        if axes_as_input:
            return self.op(op_type, x, self.const(list(axes), np.int64), out=out, keepdims=int(keepdims))
        return self.op(op_type, x, out=out, axes=list(axes), keepdims=int(keepdims))


@dataclasses.dataclass(frozen=True)
class PluginRef:
    """The TensorRT plugin creator that serves an op: name (the node's op_type), version, namespace, and who
    provides it: ``"torchtrt_ext"`` (our C++ library or our Python plugins) or ``"tensorrt"`` (TensorRT's own plugin
    library, whose creators live in namespace ``""``)."""

    name: str
    version: str = "1"
    namespace: str = DOMAIN
    provider: str = PROVIDER_OURS

    @property
    def id(self) -> str:
        """``<namespace>::<name>:<version>``, how the engine metadata lists a plugin."""
        return f"{self.namespace}::{self.name}:{self.version}"


@dataclasses.dataclass(frozen=True)
class Buffer:
    """A raw device buffer as a launcher sees it: address, shape and torch dtype of a contiguous tensor."""

    ptr: int
    shape: tuple[int, ...]
    dtype: torch.dtype

    @classmethod
    def of(cls, tensor: torch.Tensor) -> Buffer:
        """The buffer of a contiguous torch tensor."""
        return cls(tensor.data_ptr(), tuple(tensor.shape), tensor.dtype)


# launch(inputs, outputs, stream, **attrs): the op's kernel on raw buffers (None for an absent optional input),
# on the CUDA stream handle `stream`; raises KernelError on a failed launch, LibraryNotFoundError without the library.
Launcher = Callable[..., None]


class SymDim:
    """An ONNX dimension whose value is unknown (a dim_param, or nothing): arithmetic on it stays unknown."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name

    def _unknown(self, *_: Any) -> SymDim:
        return SymDim()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _unknown
    __floordiv__ = __rfloordiv__ = __truediv__ = __mod__ = _unknown


Shape = tuple  # of int, torch.SymInt or SymDim
ShapeRule = Callable[..., list[tuple[Shape, torch.dtype]]]


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """Everything that defines a custom op; every other layer reads it from here.

    ``eager(*tensors, **attrs)`` is the reference PyTorch math. ``shape_rule(shapes, dtypes, **attrs)`` returns
    one ``(shape, dtype)`` per output and must only do arithmetic on the dims (they may be symbolic).
    ``decompose(d, inputs, outputs, **attrs)`` emits standard ONNX nodes with ``d`` writing exactly ``outputs``.
    ``prepare(shapes, dtypes, **attrs)`` checks input-dependent rules (an axis against the rank) and returns the
    canonical attributes (e.g. a non-negative axis). ``cuda`` optionally replaces ``eager`` on CUDA tensors, called
    like it with inputs and canonical attributes the op has checked; it raises ``LibraryNotFoundError`` when its
    library is missing, and the op then falls back to ``eager``.
    Optional inputs (passed as None) must come last. ``output_dtypes`` fixes the dtype of an output (None: the
    inputs' type, the default for every output). ``differentiable=False`` makes a backward through the op raise a
    clear error.

    ``plugin`` binds the op to its TensorRT plugin (default: ours, named like the op, ``version``, namespace
    ``torchtrt_ext``). ``launch(inputs, outputs, stream, **attrs)`` runs the op's kernel on raw ``Buffer``s with
    canonical attributes: the Python plugin calls it (an op without one has no Python plugin), and so may ``cuda``.
    ``fallback_plugin``: for an op bound to a plugin TensorRT provides, our own C++ plugin of the same name and version
    that serves it where TensorRT's plugin library does not exist (TensorRT-RTX).
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[Attr, ...]
    eager: Callable[..., Any]
    shape_rule: ShapeRule
    decompose: Callable[..., None]
    prepare: Callable[..., dict[str, Any]] | None = None
    cuda: Callable[..., Any] | None = None
    optional_inputs: tuple[str, ...] = ()
    dtypes: tuple[torch.dtype, ...] = FLOAT_DTYPES
    version: str = "1"
    doc: str = ""
    torch_name: str = ""
    output_dtypes: tuple[torch.dtype | None, ...] = ()
    differentiable: bool = True
    plugin: PluginRef | None = None
    launch: Launcher | None = None
    fallback_plugin: PluginRef | None = None

    def __post_init__(self) -> None:
        if self.plugin is None:
            object.__setattr__(self, "plugin", PluginRef(self.name, self.version))
        plugin = self.plugin_ref
        if plugin.name != self.name or plugin.version != self.version or plugin.provider not in PROVIDERS:
            raise OpDefinitionError(
                f"op {self.name} v{self.version}: plugin {plugin} must be named and versioned like the op (the node's "
                f"op_type and plugin_version are the creator's) and provided by one of {PROVIDERS}")
        fallback = self.fallback_plugin
        if fallback is not None and (plugin.provider != PROVIDER_TENSORRT or fallback.provider != PROVIDER_OURS
                                     or (fallback.name, fallback.version) != (plugin.name, plugin.version)):
            raise OpDefinitionError(
                f"op {self.name}: fallback_plugin {fallback} must be ours, named and versioned like the op, and only "
                f"for an op bound to a plugin TensorRT provides (plugin {plugin})")

    @property
    def plugin_ref(self) -> PluginRef:
        """The plugin binding, never None (``plugin`` filled in by the definition)."""
        assert self.plugin is not None
        return self.plugin

    @property
    def op_name(self) -> str:
        """The op's name in the torch.library namespace: ``torch_name``, else the lower-cased ONNX name."""
        return self.torch_name or self.name.lower()

    @property
    def qualname(self) -> str:
        """The torch.library name, ``torchtrt_ext::<op_name>``."""
        return f"{DOMAIN}::{self.op_name}"

    def attr(self, name: str) -> Attr:
        """The attribute called ``name``."""
        for attr in self.attrs:
            if attr.name == name:
                return attr
        raise KeyError(name)

    def validate_attrs(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Check names, types and allowed values; fill defaults. Raises InvalidAttributeError."""
        known = {a.name for a in self.attrs}
        unknown = sorted(set(attrs) - known)
        if unknown:
            raise InvalidAttributeError(
                f"{self.name}: unknown attribute(s) {unknown}. Allowed: {sorted(known)}.")
        out = {}
        for attr in self.attrs:
            if attr.name in attrs:
                out[attr.name] = attr.validate(self.name, attrs[attr.name])
            elif attr.required:
                raise InvalidAttributeError(f"{self.name}: argument {attr.label} is required.")
            else:
                out[attr.name] = attr.default
        return out

    def node_attributes(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """The ONNX attributes of a node: the op's attributes plus plugin_version and plugin_namespace."""
        return {**attrs, "plugin_version": self.plugin_ref.version, "plugin_namespace": self.plugin_ref.namespace}

    def make_node(self, inputs: Sequence[str], outputs: Sequence[str], name: str | None = None,
                  **attrs: Any) -> onnx.NodeProto:
        """An ONNX node of this op (attributes validated, defaults filled) as DESIGN.md §3 describes it."""
        full = self.validate_attrs(attrs)
        return helper.make_node(self.name, list(inputs), list(outputs), name=name, domain=DOMAIN,
                                **self.node_attributes(full))


class CustomOp:
    """A defined op: call it like a function on tensors; it also carries its exporter hooks."""

    def __init__(self, spec: OpSpec) -> None:
        self.spec = spec
        self._check_definition()
        self._register_torch_op()
        self._register_onnx_schema()
        self.autograd_function = self._make_autograd_function()
        self.translation = self._make_translation()
        self._warned_cuda = False
        self._calls: dict[tuple, _Call] = {}  # call signature (see _signature) -> its checked attributes and route
        self._n_outputs = len(spec.outputs)
        self._sequence_attrs = tuple(a.name for a in spec.attrs if a.kind in ("ints", "floats"))

    # ----------------------------------------------------------------------------------------------- definition
    def _check_definition(self) -> None:
        spec = self.spec
        if not spec.name.isidentifier() or not spec.inputs or not spec.outputs:
            raise OpDefinitionError(f"op {spec.name!r}: needs an identifier name, inputs and outputs")
        names = list(spec.inputs) + [a.name for a in spec.attrs]
        if len(set(names)) != len(names):
            raise OpDefinitionError(f"op {spec.name}: input and attribute names must be unique, got {names}")
        optional = list(spec.optional_inputs)
        if optional and list(spec.inputs[-len(optional):]) != optional:
            raise OpDefinitionError(f"op {spec.name}: optional inputs {optional} must be the last inputs")
        if spec.output_dtypes and len(spec.output_dtypes) != len(spec.outputs):
            raise OpDefinitionError(f"op {spec.name}: output_dtypes needs one entry (a dtype or None) per output "
                                    f"{list(spec.outputs)}, got {list(spec.output_dtypes)}")
        if spec.op_name in _DEFINED or onnx.defs.has(spec.name, DOMAIN):
            raise OpDefinitionError(f"op {spec.name}: already defined in this process; define each op once")

    def _torch_schema(self) -> str:
        spec = self.spec
        args = [f"Tensor{'?' if n in spec.optional_inputs else ''} {n}" for n in spec.inputs]
        args += [f"{_KINDS[a.kind][1]} {a.name}" for a in spec.attrs]
        outs = "Tensor" if len(spec.outputs) == 1 else "(" + ", ".join(["Tensor"] * len(spec.outputs)) + ")"
        return f"{spec.op_name}({', '.join(args)}) -> {outs}"

    def _register_torch_op(self) -> None:
        spec = self.spec
        name = spec.op_name
        _LIBRARY.define(self._torch_schema())
        n_in = len(spec.inputs)

        def split(args: tuple) -> tuple[tuple, dict[str, Any]]:
            return args[:n_in], {a.name: v for a, v in zip(spec.attrs, args[n_in:])}

        def eager_impl(*args: Any) -> Any:
            tensors, attrs = split(args)
            return _as_output(spec.eager(*tensors, **attrs), len(spec.outputs))

        def cuda_impl(*args: Any) -> Any:
            tensors, attrs = split(args)
            return self._run_cuda(tensors, attrs)

        def fake_impl(*args: Any) -> Any:
            tensors, attrs = split(args)
            present = [t for t in tensors if t is not None]
            rule = spec.shape_rule([tuple(t.shape) for t in present], [t.dtype for t in present], **attrs)
            device = present[0].device
            outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in rule]
            return outs[0] if len(outs) == 1 else tuple(outs)

        def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
            tensors, attrs = split(inputs)
            ctx.attrs = attrs
            ctx.present = [t is not None for t in tensors]
            ctx.save_for_backward(*[t for t in tensors if t is not None])

        def backward(ctx: Any, *grads: Any) -> tuple:
            if not spec.differentiable:
                raise InvalidInputError(failure(
                    f"{spec.name}: a gradient was asked for through the op", "no backward through it: the op has no "
                    "gradient", "detach its inputs (e.g. boxes.detach()) or run it under torch.no_grad()"))
            saved = iter(ctx.saved_tensors)
            with torch.enable_grad():
                leaves = [next(saved).detach().requires_grad_(True) if p else None for p in ctx.present]
                outs = spec.eager(*leaves, **ctx.attrs)
                outs = outs if isinstance(outs, tuple) else (outs,)
                wrt = [t for t in leaves if t is not None and t.is_floating_point()]
                pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
                got = torch.autograd.grad([o for o, _ in pairs], wrt, [g for _, g in pairs], allow_unused=True)
            by_id = {id(t): g for t, g in zip(wrt, got)}
            return tuple(by_id.get(id(t)) if t is not None else None for t in leaves) + (None,) * len(spec.attrs)

        _LIBRARY.impl(name, eager_impl, "CompositeExplicitAutograd")
        _LIBRARY.impl(name, cuda_impl, "CUDA")
        torch.library.register_fake(spec.qualname, fake_impl, lib=_LIBRARY)
        torch.library.register_autograd(spec.qualname, backward, setup_context=setup_context, lib=_LIBRARY)
        _DEFINED[name] = self
        self.torch_op = getattr(torch.ops.torchtrt_ext, name)

    def _register_onnx_schema(self) -> None:
        spec = self.spec
        fp = onnx.defs.OpSchema.FormalParameter
        option = onnx.defs.OpSchema.FormalParameterOption
        types = [_ONNX_TYPES[d] for d in spec.dtypes]
        inputs = [fp(n, "T", param_option=option.Optional if n in spec.optional_inputs else option.Single)
                  for n in spec.inputs]
        attributes = [onnx.defs.OpSchema.Attribute(a.name, _KINDS[a.kind][2], a.doc, required=a.required)
                      for a in spec.attrs]
        attributes += [onnx.defs.OpSchema.Attribute(n, onnx.defs.OpSchema.AttrType.STRING, n, required=False)
                       for n in ("plugin_version", "plugin_namespace")]
        fixed = spec.output_dtypes or (None,) * len(spec.outputs)
        outputs = [fp(n, "T" if d is None else f"T{i}") for i, (n, d) in enumerate(zip(spec.outputs, fixed))]
        constraints = [("T", types, "floating point tensors the op supports")]
        constraints += [(f"T{i}", [_ONNX_TYPES[d]], f"the type of output {n!r}")
                        for i, (n, d) in enumerate(zip(spec.outputs, fixed)) if d is not None]
        schema = onnx.defs.OpSchema(spec.name, DOMAIN, DOMAIN_VERSION, doc=spec.doc, inputs=inputs, outputs=outputs,
                                    type_constraints=constraints, attributes=attributes)
        onnx.defs.register_schema(schema)

    def _make_autograd_function(self) -> type[torch.autograd.Function]:
        spec = self.spec
        n_in = len(spec.inputs)

        def forward(ctx: Any, *args: Any) -> Any:
            return self.torch_op(*args)

        def symbolic(g: Any, *args: Any) -> Any:
            tensors = [t for t in args[:n_in] if t is not None]
            attrs = {a.name: v for a, v in zip(spec.attrs, args[n_in:])}
            kwargs = {f"{k}_{_KINDS[spec.attr(k).kind][3] if k in attrs else 's'}": v
                      for k, v in spec.node_attributes(attrs).items()}
            outs = g.op(f"{DOMAIN}::{spec.name}", *tensors, outputs=len(spec.outputs), **kwargs)
            outs = outs if isinstance(outs, (tuple, list)) else (outs,)
            if all(t.type().dim() is not None and t.type().dtype() is not None for t in tensors):
                shapes = [tuple(SymDim() if d is None else d for d in t.type().varyingSizes()) for t in tensors]
                rule = spec.shape_rule(shapes, [t.type().dtype() for t in tensors], **attrs)
                for out, (shape, dtype) in zip(outs, rule):
                    sizes = [None if isinstance(d, SymDim) else int(d) for d in shape]
                    out.setType(tensors[0].type().with_dtype(dtype).with_sizes(sizes))
            return outs[0] if len(outs) == 1 else tuple(outs)

        return type(f"{spec.name}Function", (torch.autograd.Function,),
                    {"forward": staticmethod(forward), "symbolic": staticmethod(symbolic)})

    def _make_translation(self) -> Callable[..., Any]:
        import onnxscript

        spec = self.spec
        opset = onnxscript.values.Opset(DOMAIN, DOMAIN_VERSION)
        n_in = len(spec.inputs)

        def translate(*args: Any) -> Any:
            attrs = {a.name: (list(v) if isinstance(v, tuple) else v) for a, v in zip(spec.attrs, args[n_in:])}
            inputs = list(args[:n_in])
            while inputs and inputs[-1] is None:
                inputs.pop()
            return getattr(opset, spec.name)(*inputs, **spec.node_attributes(attrs))

        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in spec.inputs]
        params += [inspect.Parameter(a.name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in spec.attrs]
        translate.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        translate.__name__ = f"translate_{spec.name}"
        return translate

    # ------------------------------------------------------------------------------------------------- calling
    def __call__(self, *tensors: torch.Tensor | None, **attrs: Any) -> Any:
        """Validate inputs and attributes (once per new call signature), then run the op: straight to the CUDA kernel
        where nothing needs the dispatcher, else through torch.library (autograd, torch.compile, exporters)."""
        if _is_dynamo_compiling():  # dynamo traces the call: every check, then the dispatcher
            missing, attrs = self._check_call(tensors, attrs)
            return self.torch_op(*tensors, *(None,) * missing, *[attrs[a.name] for a in self.spec.attrs])
        if _forward_ad._current_level >= 0:  # inside forward_ad.dual_level(): one module attribute when outside
            self._refuse_tangents(tensors)
        key = _signature(tensors, attrs, self._sequence_attrs)
        try:
            call = self._calls[key]
        except KeyError:  # a new signature, or inputs that are checked on every call (key None)
            call = None
        except TypeError:  # an unhashable attribute value (a list): checked on every call
            call = key = None
        if call is None:  # checked outside the except clauses, so a check's error carries no KeyError context
            call = self._plan_call(tensors, attrs, key)
        if call.absent:
            tensors += call.absent
        if _is_tracing():  # the legacy TorchScript exporter: emit the node through symbolic
            return self.autograd_function.apply(*tensors, *call.args)
        if call.direct and not (call.grad and _grad_enabled()) and not _dispatch_modes() and not _functorch_active():
            try:  # the kernel itself (no _run_cuda frame: this is the path a small kernel's host time is judged on)
                out = self.spec.cuda(*tensors, **call.attrs)  # type: ignore[misc]
            except LibraryNotFoundError as exc:
                return self._eager_fallback(tensors, call.attrs, exc)
            return out if self._n_outputs == 1 else _as_output(out, self._n_outputs)
        return self.torch_op(*tensors, *call.args)

    def _refuse_tangents(self, tensors: tuple) -> None:
        """Forward-mode AD would lose an input's tangent (the op defines no jvp): refuse it instead of a silent zero."""
        for name, t in zip(self.spec.inputs, tensors):
            if isinstance(t, torch.Tensor) and _forward_ad.unpack_dual(t).tangent is not None:
                raise InvalidInputError(failure(
                    f"{self.spec.name}: input {name!r} carries a forward-mode AD tangent (torch.autograd.forward_ad)",
                    "tensors without tangents: the op has reverse-mode autograd (backward) only",
                    "take the derivative with backward(), or call the PyTorch math of the op under forward AD"))

    def _plan_call(self, tensors: tuple, attrs: dict[str, Any], key: tuple | None) -> _Call:
        """Every check of a call (``_check_call``) and how to run it, remembered under ``key`` unless it is None."""
        missing, attrs = self._check_call(tensors, attrs)
        present = [t for t in tensors if t is not None]
        call = _Call(absent=(None,) * missing, attrs=attrs, args=tuple(attrs[a.name] for a in self.spec.attrs),
                     direct=self.spec.cuda is not None and all(type(t) in _PLAIN and t.is_cuda for t in present),
                     grad=any(t.requires_grad for t in present))
        if key is not None:
            if len(self._calls) >= _MAX_SIGNATURES:
                self._calls.clear()
            self._calls[key] = call
        return call

    def _check_call(self, tensors: tuple, attrs: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Every check of a call: input count and types, attributes, ``prepare``. Returns (the number of absent
        optional inputs to fill with None, the canonical attributes)."""
        spec = self.spec
        if len(tensors) > len(spec.inputs) or len(tensors) < len(spec.inputs) - len(spec.optional_inputs):
            raise InvalidInputError(f"{spec.name}: expected inputs {list(spec.inputs)} "
                                    f"(optional: {list(spec.optional_inputs)}), got {len(tensors)} tensors")
        missing = len(spec.inputs) - len(tensors)
        tensors = tensors + (None,) * missing
        for name, t in zip(spec.inputs, tensors):
            if t is None and name in spec.optional_inputs:
                continue
            if not isinstance(t, torch.Tensor):
                raise InvalidInputError(f"{spec.name}: input {name!r} must be a torch.Tensor, got {type(t).__name__}")
            if t.dtype not in spec.dtypes:
                raise InvalidInputError(f"{spec.name}: input {name!r} has dtype {t.dtype}; allowed: "
                                        f"{[str(d) for d in spec.dtypes]}", remedy="cast it, e.g. x.float()")
        attrs = spec.validate_attrs(attrs)
        if spec.prepare is not None:
            present = [t for t in tensors if t is not None]
            attrs = spec.prepare([tuple(t.shape) for t in present], [t.dtype for t in present], **attrs)
        return missing, attrs

    def _run_cuda(self, tensors: Sequence[torch.Tensor | None], attrs: dict[str, Any]) -> Any:
        """The op's CUDA kernel, or its PyTorch math (warning once) when the kernel library is missing."""
        spec = self.spec
        if spec.cuda is None:
            return _as_output(spec.eager(*tensors, **attrs), len(spec.outputs))
        try:
            return _as_output(spec.cuda(*tensors, **attrs), len(spec.outputs))
        except LibraryNotFoundError as exc:
            return self._eager_fallback(tensors, attrs, exc)

    def _eager_fallback(self, tensors: Sequence[torch.Tensor | None], attrs: dict[str, Any],
                        exc: LibraryNotFoundError) -> Any:
        """The op's PyTorch math in place of its missing CUDA kernel, with one warning per op naming why."""
        if not self._warned_cuda:
            warnings.warn(f"{self.spec.name}: CUDA kernel unavailable, using PyTorch math. {exc}", stacklevel=3)
            self._warned_cuda = True
        return _as_output(self.spec.eager(*tensors, **attrs), len(self.spec.outputs))

    def __repr__(self) -> str:
        return f"CustomOp({self.spec.name}, inputs={list(self.spec.inputs)}, attrs={[a.name for a in self.spec.attrs]})"


@dataclasses.dataclass(frozen=True, slots=True)
class _Call:
    """What the checks of one call signature give, and how such a call runs.

    ``absent``: the Nones that fill absent optional inputs; ``attrs``: the canonical attributes, ``args`` the same in
    schema order (the torch.library op takes them positionally); ``direct``: the op has a CUDA kernel and every input
    is a plain CUDA tensor, so the kernel may be called without the dispatcher (its dispatch costs more than a small
    kernel); ``grad``: an input requires grad, so with grad mode on the call needs the dispatcher's autograd.
    """

    absent: tuple[None, ...]
    attrs: dict[str, Any]
    args: tuple
    direct: bool
    grad: bool


_PLAIN = (torch.Tensor, torch.nn.Parameter)  # tensors with concrete shapes and no __torch_function__ of their own
_MAX_SIGNATURES = 256  # call signatures whose checks an op remembers; the record starts over when full
# The state a cached call checks, bound once: a module global and a call instead of a chain of attribute lookups.
# Dynamo knows is_dynamo_compiling by the function object, so it folds the alias to True as it folds the original.
_is_dynamo_compiling = torch.compiler.is_dynamo_compiling
_is_tracing = torch._C._is_tracing  # torch.jit.is_tracing() without its is_scripting() frame (never scripted here)
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack  # make_fx, FlopCounterMode, ...: they must see the op
_functorch_active = torch._C._are_functorch_transforms_active  # vmap, grad, jvp: their wrappers look plain
_forward_ad = torch.autograd.forward_ad  # its _current_level is -1 outside dual_level()


def _signature(tensors: tuple, attrs: dict[str, Any], sequence_attrs: tuple[str, ...]) -> tuple | None:
    """A key of everything the checks and the routing of a call read: per attribute its name, value and type, and for
    the list-valued attributes (``sequence_attrs``) the types of a tuple's elements (so ``True`` never passes for a
    checked ``1``); per input its shape, dtype, whether it is on CUDA and whether it requires grad. None, and nothing
    is remembered, when an input is not a plain torch.Tensor or Parameter (fake and functional tensors, symbolic
    shapes, non-tensors: those are checked on every call). The key may hold an unhashable value (a list)."""
    # flat, one tuple (cheaper to build and hash than nested ones), and still unambiguous: (name, value) pairs, then
    # types, then per input a torch.Size and three scalars or a None
    key: list[Any] = [*attrs.items(), *map(type, attrs.values())]
    for name in sequence_attrs:
        value = attrs.get(name)
        if isinstance(value, tuple):
            key.append(tuple(map(type, value)))
    for t in tensors:
        if type(t) in _PLAIN:
            key += (t.shape, t.dtype, t.is_cuda, t.requires_grad)
        elif t is None:
            key.append(None)
        else:
            return None
    return tuple(key)


def _as_output(value: Any, n: int) -> Any:
    if n == 1:
        return value
    if not isinstance(value, (tuple, list)) or len(value) != n:
        raise OpDefinitionError(f"eager function must return {n} tensors, got {type(value).__name__}")
    return tuple(value)


_LIBRARY = torch.library.Library(DOMAIN, "FRAGMENT")
_DEFINED: dict[str, CustomOp] = {}


def define_op(spec: OpSpec) -> CustomOp:
    """Define a custom op from its spec (once per process) and return the callable op."""
    return CustomOp(spec)


def registered_ops() -> dict[str, CustomOp]:
    """Every defined op, by ONNX op_type."""
    return {op.spec.name: op for op in _DEFINED.values()}


def get_op(op_type: str) -> CustomOp:
    """The defined op whose ONNX op_type is ``op_type``; raises UnknownOpError (a KeyError) with the remedy."""
    ops = registered_ops()
    if op_type not in ops:
        raise UnknownOpError(f"no torchtrt_ext op {op_type!r} is defined in this process (known: {sorted(ops)})",
                             remedy="import the module that defines it (define_op) before exporting or decomposing")
    return ops[op_type]


def custom_translation_table() -> dict[Any, Callable[..., Any]]:
    """The dynamo exporter's custom_translation_table entries for every defined op."""
    return {op.torch_op.default: op.translation for op in _DEFINED.values()}


def torch_dtype(onnx_elem_type: int) -> torch.dtype | None:
    """The torch dtype of an ONNX element type (None when not mapped)."""
    return _TORCH_FROM_ONNX.get(onnx_elem_type)


def onnx_elem_type(dtype: torch.dtype) -> int:
    """The ONNX element type of a torch dtype."""
    return _ONNX_FROM_TORCH[dtype]
