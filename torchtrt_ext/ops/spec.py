"""What a custom op is: one ``OpSpec`` from which every layer of the op is derived, and the ops defined so far.

An ``OpSpec`` holds the op's name, version, inputs and outputs, attributes (names, kinds, defaults, rules), the
reference PyTorch math, the output shape and dtype rule, the decomposition into standard ONNX ops, and the plugin
binding (``PluginRef``: which TensorRT plugin creator serves the op, and who provides it) with the raw-buffer
launcher that both the eager CUDA path and the Python plugin call. The passes, the backend, the Python plugins and
the doctor read ops through this module (``registered_ops``, ``get_op``); ``define_op`` (``ops._torch_op``) turns a
spec into the callable op and its torch.library and exporter registrations.

Every node has domain ``torchtrt_ext``, op_type = plugin name, the attributes, and ``plugin_version`` /
``plugin_namespace`` so TensorRT's ONNX parser finds the plugin creator (docs/design.md#onnx-contract).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, TypeAlias, TypeVar, get_args

import numpy as np
import onnx
import torch
from onnx import helper

from torchtrt_ext.errors import InvalidAttributeError, OpDefinitionError, UnknownOpError

DOMAIN = "torchtrt_ext"
DOMAIN_VERSION = 1
PROVIDER_OURS = "torchtrt_ext"  # libtorchtrt_ext_plugins.so, or the Python plugins where it is not built
PROVIDER_TENSORRT = "tensorrt"  # TensorRT's own plugin library (libnvinfer_plugin), e.g. EfficientNMS_TRT
PROVIDERS = (PROVIDER_OURS, PROVIDER_TENSORRT)
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_REQUIRED: Any = object()  # the default of a required attribute (Any: it stands in a field of any value type)

AttrKind = Literal["int", "float", "ints", "floats", "str"]
ATTR_KINDS: tuple[AttrKind, ...] = get_args(AttrKind)
_ACCEPTED: dict[str, tuple[type, ...]] = {  # attribute kind -> the Python types a value of it may have
    "int": (int,), "float": (float, int), "ints": (list, tuple), "floats": (list, tuple), "str": (str,)}
_TORCH_FROM_ONNX: dict[int, torch.dtype] = {
    onnx.TensorProto.FLOAT: torch.float32, onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.BFLOAT16: torch.bfloat16, onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.INT64: torch.int64, onnx.TensorProto.INT32: torch.int32, onnx.TensorProto.BOOL: torch.bool}
_ONNX_FROM_TORCH = {v: k for k, v in _TORCH_FROM_ONNX.items()}


@dataclasses.dataclass(frozen=True)
class Attr:
    """One op attribute: ONNX/plugin field name, kind ('int', 'float', 'ints', 'floats', 'str'), default, rule.

    ``check`` returns True for allowed values; ``allowed`` describes them for error messages; ``arg`` is the
    Python argument name users pass it as, when it differs from the field name (``dim`` for ``axis``).
    """

    name: str
    kind: AttrKind
    default: Any = _REQUIRED
    doc: str = ""
    check: Callable[[Any], bool] | None = None
    allowed: str = ""
    arg: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ATTR_KINDS:
            raise OpDefinitionError(f"attribute {self.name!r}: kind {self.kind!r} is not one of {sorted(ATTR_KINDS)}")

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
        accepted = isinstance(value, _ACCEPTED[self.kind])  # a flag, so value stays Any for the coercions below
        if isinstance(value, bool) or not accepted:
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
                "magnitude")


def finite_positive(value: float) -> bool:
    """Attribute check: a finite number > 0 (an eps)."""
    return math.isfinite(value) and value > 0


class BakedAttributeError(OpDefinitionError):
    """A decomposition used an attribute's value in Python (``if``, arithmetic, ``int()``), so it cannot be an ONNX
    function body that serves every node of the op: each node's attributes are only known when it is inlined."""


_REF_KINDS: dict[str, tuple[Any, str, Any]] = {  # attribute kind -> (AttributeProto type, Constant field, numpy type)
    "int": (onnx.AttributeProto.INT, "value_int", np.int64),
    "float": (onnx.AttributeProto.FLOAT, "value_float", np.float32),
    "ints": (onnx.AttributeProto.INTS, "value_ints", np.int64),
    "floats": (onnx.AttributeProto.FLOATS, "value_floats", np.float32),
    "str": (onnx.AttributeProto.STRING, "value_string", None)}


ATTRIBUTE_TYPES: dict[str, Any] = {kind: proto_type for kind, (proto_type, _, _) in _REF_KINDS.items()}
"""The ONNX AttributeProto type of each attribute kind."""


class AttrRef:
    """An op attribute inside a function body: the calling node's value, known only when the node is inlined.

    A decomposition gets one per attribute when the op's function is generated; ``Decomposer.const`` turns it into a
    tensor and ``Decomposer.op`` passes it on as a node attribute. Anything else (a comparison, ``int()``, indexing)
    raises ``BakedAttributeError``: the value would be baked into a body shared by every node of the op.
    """

    def __init__(self, name: str, kind: AttrKind) -> None:
        self.name, self.kind = name, kind

    def __repr__(self) -> str:
        return f"AttrRef({self.name!r}, {self.kind!r})"

    def _baked(self, *_: Any) -> Any:
        raise BakedAttributeError(
            f"attribute {self.name!r} is used as a Python value in the decomposition (a branch, arithmetic or a "
            "conversion on it), so its function body would hold one node's value",
            remedy=f"compute with d.const({self.name}) (a tensor) and standard ops instead, or accept that the op has "
                   "no ONNX function (its nodes then need the plugin or passes.decompose_custom_ops)")

    __bool__ = __int__ = __float__ = __index__ = __iter__ = __len__ = __getitem__ = __hash__ = _baked
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _baked
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __neg__ = __truediv__ = __floordiv__ = _baked
    __mod__ = __pow__ = __and__ = __or__ = __contains__ = _baked


@dataclasses.dataclass
class Decomposer:
    """Builds the standard-ONNX nodes that replace one custom node (see ``OpSpec.decompose``).

    Attributes reach a decomposition as Python values or, when the op's ONNX function is generated, as ``AttrRef``s:
    turn them into tensors with ``const`` (both work) rather than branching on them in Python.
    """

    opset: int
    prefix: str
    nodes: list[onnx.NodeProto] = dataclasses.field(default_factory=list)
    _count: int = 0

    def _fresh(self) -> str:
        self._count += 1
        return f"{self.prefix}/_{self._count}" if self.prefix else f"_{self._count}"

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs: Any) -> str:
        """Append one single-output node and return its output name (``out`` when given)."""
        return self.op_outputs(op_type, *inputs, count=1, outs=None if out is None else [out], **attrs)[0]

    def op_outputs(self, op_type: str, *inputs: str, count: int, outs: Sequence[str] | None = None,
                   **attrs: Any) -> list[str]:
        """Append one node with ``count`` outputs (named ``outs`` when given) and return their names; an ``AttrRef``
        attribute value becomes a reference to the calling node's attribute."""
        outputs = list(outs) if outs is not None else [self._fresh() for _ in range(count)]
        name = f"{self.prefix}/{op_type}" if self.prefix else op_type
        name += self._fresh().rsplit("/", 1)[-1]
        plain = {k: v for k, v in attrs.items() if not isinstance(v, AttrRef)}
        node = helper.make_node(op_type, list(inputs), outputs, name=name, **plain)
        node.attribute.extend(helper.make_attribute_ref(k, _REF_KINDS[v.kind][0], ref_attr_name=v.name)
                              for k, v in attrs.items() if isinstance(v, AttrRef))
        self.nodes.append(node)
        return outputs

    def const(self, value: Any, dtype: Any = np.float32) -> str:
        """A tensor holding ``value`` as ``dtype``: a scalar or array, an ``AttrRef`` (0-D for int/float, 1-D for
        ints/floats), or a list mixing numbers and int/float ``AttrRef``s (1-D); returns its name."""
        if isinstance(value, AttrRef):
            field, natural = _REF_KINDS[value.kind][1:]
            attrs: dict[str, Any] = {field: value}
            tensor = self.op("Constant", **attrs)
            return tensor if natural is None or np.dtype(natural) == np.dtype(dtype) else \
                self.op("Cast", tensor, to=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
        if isinstance(value, (list, tuple)) and any(isinstance(v, AttrRef) for v in value):
            axis = self.const([0], np.int64)
            parts = [self.op("Unsqueeze", self.const(v, dtype), axis) for v in value]
            return parts[0] if len(parts) == 1 else self.op("Concat", *parts, axis=0)
        array = np.asarray(value, dtype=dtype)
        return self.op("Constant", value=onnx.numpy_helper.from_array(array, name=self._fresh()))

    def reduce(self, op_type: str, x: str, axes: Sequence[int] | AttrRef, keepdims: bool = True,
               out: str | None = None) -> str:
        """A Reduce* node over ``axes``, as an attribute before opset 18 (13 for ReduceSum) and an input after."""
        axes_as_input = self.opset >= (13 if op_type == "ReduceSum" else 18)
        if axes_as_input:
            return self.op(op_type, x, self.const(axes, np.int64), out=out, keepdims=int(keepdims))
        if isinstance(axes, AttrRef) or any(isinstance(a, AttrRef) for a in axes):
            raise BakedAttributeError(f"{op_type} takes its axes as an attribute before opset 18: an attribute of "
                                      "the op cannot reach it", remedy="export with opset >= 18")
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


Shape: TypeAlias = tuple[int | torch.SymInt | SymDim, ...]
ShapeRule: TypeAlias = Callable[..., list[tuple[Shape, torch.dtype]]]


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
        """An ONNX node of this op, attributes validated and defaults filled (docs/design.md#onnx-contract)."""
        full = self.validate_attrs(attrs)
        return helper.make_node(self.name, list(inputs), list(outputs), name=name, domain=DOMAIN,
                                **self.node_attributes(full))


class DefinedOp(Protocol):
    """A defined op as the other layers see it: its spec, and a call on tensors (``ops.CustomOp`` is one)."""

    @property
    def spec(self) -> OpSpec:
        """The definition the op was made from."""

    def __call__(self, *tensors: torch.Tensor | None, **attrs: Any) -> Any:
        """Run the op on tensors with attributes."""


_Op = TypeVar("_Op", bound=DefinedOp)
_DEFINED: dict[str, DefinedOp] = {}  # by ONNX op_type


def _check_definition(spec: OpSpec) -> None:
    """Raise OpDefinitionError unless ``spec`` is a well-formed op not yet defined in this process."""
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
    if (spec.name in _DEFINED or any(op.spec.op_name == spec.op_name for op in _DEFINED.values())
            or onnx.defs.has(spec.name, DOMAIN)):
        raise OpDefinitionError(f"op {spec.name}: already defined in this process; define each op once")


def record_definition(spec: OpSpec, make: Callable[[OpSpec], _Op]) -> _Op:
    """Check ``spec`` as a new, well-formed op (OpDefinitionError otherwise), make its op with ``make`` (the torch
    side: ``define_op``) and record it for ``registered_ops``."""
    _check_definition(spec)
    op = make(spec)
    _DEFINED[spec.name] = op
    return op


def registered_ops() -> dict[str, DefinedOp]:
    """Every defined op, by ONNX op_type."""
    return dict(_DEFINED)


def get_op(op_type: str) -> DefinedOp:
    """The defined op whose ONNX op_type is ``op_type``; raises UnknownOpError (a KeyError) with the remedy."""
    if op_type not in _DEFINED:
        raise UnknownOpError(f"no torchtrt_ext op {op_type!r} is defined in this process (known: {sorted(_DEFINED)})",
                             remedy="import the module that defines it (define_op) before exporting or decomposing")
    return _DEFINED[op_type]


def torch_dtype(onnx_elem_type: int) -> torch.dtype | None:
    """The torch dtype of an ONNX element type (None when not mapped)."""
    return _TORCH_FROM_ONNX.get(onnx_elem_type)


def onnx_elem_type(dtype: torch.dtype) -> int:
    """The ONNX element type of a torch dtype."""
    return _ONNX_FROM_TORCH[dtype]
