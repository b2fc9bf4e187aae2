"""How a defined op meets torch: its torch.library op (eager, CUDA, fake and autograd kernels), the legacy exporter's
``symbolic``, the dynamo exporter's ONNX schema and onnxscript translation, and the eager call path with its cache of
checked call signatures (``CustomOp.__call__``, the hot path a small kernel's host time is judged on).

What an op is lives in ``ops.spec``; this module only reads it.
"""
from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias, cast

import onnx
import torch

from torchtrt_ext.errors import InvalidInputError, LibraryNotFoundError, OpDefinitionError, failure
from torchtrt_ext.ops.spec import (
    DOMAIN,
    DOMAIN_VERSION,
    AttrKind,
    OpSpec,
    SymDim,
    record_definition,
    registered_ops,
)

# attribute kind -> (torch schema type, ONNX attribute type, legacy g.op suffix)
_KINDS: dict[AttrKind, tuple[str, onnx.defs.OpSchema.AttrType, str]] = {
    "int": ("int", onnx.defs.OpSchema.AttrType.INT, "i"),
    "float": ("float", onnx.defs.OpSchema.AttrType.FLOAT, "f"),
    "ints": ("int[]", onnx.defs.OpSchema.AttrType.INTS, "i"),
    "floats": ("float[]", onnx.defs.OpSchema.AttrType.FLOATS, "f"),
    "str": ("str", onnx.defs.OpSchema.AttrType.STRING, "s"),
}
_ONNX_TYPES = {torch.float32: "tensor(float)", torch.float16: "tensor(float16)", torch.bfloat16: "tensor(bfloat16)",
               torch.float64: "tensor(double)", torch.int64: "tensor(int64)", torch.int32: "tensor(int32)",
               torch.bool: "tensor(bool)"}
_Tensors: TypeAlias = tuple[torch.Tensor | None, ...]  # a call's inputs, None for an absent optional one
_Key: TypeAlias = tuple[Any, ...]  # a call signature (see _signature)


class CustomOp:
    """A defined op: call it like a function on tensors; it also carries its exporter hooks. Made by ``define_op``,
    which checks the spec first (constructing one registers the op with torch.library)."""

    def __init__(self, spec: OpSpec) -> None:
        self.spec = spec
        self._register_torch_op()
        self._register_onnx_schema()
        self.autograd_function = self._make_autograd_function()
        self.translation = self._make_translation()
        self._warned_cuda = False
        # call signature (see _signature) -> its checked attributes and route; the key None is never stored: looking
        # it up raises KeyError, the path of a call whose inputs are checked every time
        self._calls: dict[_Key | None, _Call] = {}
        self._n_outputs = len(spec.outputs)
        self._sequence_attrs = tuple(a.name for a in spec.attrs if a.kind in ("ints", "floats"))

    # --------------------------------------------------------------------------------------------- registration
    def _torch_schema(self) -> str:
        spec = self.spec
        args = [f"Tensor{'?' if n in spec.optional_inputs else ''} {n}" for n in spec.inputs]
        args += [f"{_KINDS[a.kind][0]} {a.name}" for a in spec.attrs]
        outs = "Tensor" if len(spec.outputs) == 1 else "(" + ", ".join(["Tensor"] * len(spec.outputs)) + ")"
        return f"{spec.op_name}({', '.join(args)}) -> {outs}"

    def _register_torch_op(self) -> None:
        spec = self.spec
        name = spec.op_name
        _LIBRARY.define(self._torch_schema())  # type: ignore[no-untyped-call]
        n_in = len(spec.inputs)

        def split(args: tuple[Any, ...]) -> tuple[tuple[Any, ...], dict[str, Any]]:
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
            # shapes of tensors: their dims are ints or SymInts, never SymDim (that is for ONNX shapes)
            outs = [torch.empty(cast(Sequence[int | torch.SymInt], shape), dtype=dtype, device=device)
                    for shape, dtype in rule]
            return outs[0] if len(outs) == 1 else tuple(outs)

        def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
            tensors, attrs = split(inputs)
            ctx.attrs = attrs
            ctx.present = [t is not None for t in tensors]
            ctx.save_for_backward(*[t for t in tensors if t is not None])

        def backward(ctx: Any, *grads: Any) -> tuple[torch.Tensor | None, ...]:
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

        _LIBRARY.impl(name, eager_impl, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
        _LIBRARY.impl(name, cuda_impl, "CUDA")  # type: ignore[no-untyped-call]
        torch.library.register_fake(spec.qualname, fake_impl, lib=_LIBRARY)
        torch.library.register_autograd(spec.qualname, backward, setup_context=setup_context, lib=_LIBRARY)
        self.torch_op = getattr(torch.ops.torchtrt_ext, name)

    def _register_onnx_schema(self) -> None:
        spec = self.spec
        fp = onnx.defs.OpSchema.FormalParameter
        option = onnx.defs.OpSchema.FormalParameterOption
        types = [_ONNX_TYPES[d] for d in spec.dtypes]
        inputs = [fp(n, "T", param_option=option.Optional if n in spec.optional_inputs else option.Single)
                  for n in spec.inputs]
        attributes = [onnx.defs.OpSchema.Attribute(a.name, _KINDS[a.kind][1], a.doc, required=a.required)
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
            kwargs = {f"{k}_{_KINDS[spec.attr(k).kind][2] if k in attrs else 's'}": v
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
            return self.autograd_function.apply(*tensors, *call.args)  # type: ignore[no-untyped-call]
        if call.direct and not (call.grad and _grad_enabled()) and not _dispatch_modes() and not _functorch_active():
            try:  # the kernel itself (no _run_cuda frame: this is the path a small kernel's host time is judged on)
                out = self.spec.cuda(*tensors, **call.attrs)  # type: ignore[misc]
            except LibraryNotFoundError as exc:
                return self._eager_fallback(tensors, call.attrs, exc)
            return out if self._n_outputs == 1 else _as_output(out, self._n_outputs)
        return self.torch_op(*tensors, *call.args)

    def _refuse_tangents(self, tensors: _Tensors) -> None:
        """Forward-mode AD would lose an input's tangent (the op defines no jvp): refuse it instead of a silent zero."""
        for name, t in zip(self.spec.inputs, tensors):
            if not isinstance(t, torch.Tensor):
                continue
            if _forward_ad.unpack_dual(t).tangent is not None:  # type: ignore[no-untyped-call]
                raise InvalidInputError(failure(
                    f"{self.spec.name}: input {name!r} carries a forward-mode AD tangent (torch.autograd.forward_ad)",
                    "tensors without tangents: the op has reverse-mode autograd (backward) only",
                    "take the derivative with backward(), or call the PyTorch math of the op under forward AD"))

    def _plan_call(self, tensors: _Tensors, attrs: dict[str, Any], key: _Key | None) -> _Call:
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

    def _check_call(self, tensors: _Tensors, attrs: dict[str, Any]) -> tuple[int, dict[str, Any]]:
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
    args: tuple[Any, ...]
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


def _signature(tensors: _Tensors, attrs: dict[str, Any], sequence_attrs: tuple[str, ...]) -> _Key | None:
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
        if type(t) in _PLAIN:  # an exact type check (a subclass is not plain), which mypy does not narrow on
            key += (t.shape, t.dtype, t.is_cuda, t.requires_grad)  # type: ignore[union-attr]
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


_LIBRARY = torch.library.Library(DOMAIN, "FRAGMENT")  # type: ignore[no-untyped-call]


def define_op(spec: OpSpec) -> CustomOp:
    """Define a custom op from its spec (once per process) and return the callable op."""
    return record_definition(spec, CustomOp)


def custom_translation_table() -> dict[Any, Callable[..., Any]]:
    """The dynamo exporter's custom_translation_table entries for every defined op."""
    return {op.torch_op.default: op.translation
            for op in registered_ops().values() if isinstance(op, CustomOp)}
