"""The torchtrt_ext ops as TensorRT Python plugins (``tensorrt.plugin``, TensorRT >= 10.6).

The fallback where the C++ plugin library is not built (pip's TensorRT ships no headers). Each op is registered as
``torchtrt_ext::<Name>``: the name, version ("1") and namespace of the C++ creator, so the ONNX parser's plugin
fallback finds it from the same node (it passes the creator's fields, i.e. the op's attributes). Nothing about an op
is written again here:

* the output shapes and dtypes come from the op definition (``OpSpec.prepare`` and ``OpSpec.shape_rule``), applied
  to TensorRT's symbolic shape expressions;
* the supported types are ``OpSpec.dtypes`` (LINEAR format only, output types from the same rule);
* the implementation calls the op's raw-buffer launcher (``OpSpec.launch``, in the op's own files) on TensorRT's
  buffers and stream; every op of ours with a launcher gets a Python plugin.

Optional inputs: ``tensorrt.plugin`` fixes a plugin's inputs, so an op with optional inputs (DeformConv2d: bias,
mask) is registered with all of them, and ``passes.complete_optional_inputs`` (run on the graph before parsing in
``plugins="python"``) gives every node the missing ones as empty 1-D tensors of the node's dtype; the plugin treats an
empty optional input as absent (the shape rule and the kernel never see it).

Entry point: :func:`register_python_plugins` (``plugins="python"``, and ``"auto"`` without the C++ library).
``tensorrt`` is imported only when it is called.
"""
from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from torchtrt_ext.errors import MissingDependencyError, OpDefinitionError, failure
from torchtrt_ext.ops import PROVIDER_OURS, Buffer, OpSpec, registered_ops

_AUTOTUNE_NAMES = {torch.float32: "FP32", torch.float16: "FP16", torch.bfloat16: "BF16"}
_INSTALL_HINT = "pip install 'torchtrt_ext[trt]' (TensorRT >= 10.6), or use plugins='cpp' / plugins='decompose'"


def _is_empty(shape: Sequence[Any]) -> bool:
    """A placeholder of complete_optional_inputs: one dimension of constant size 0 (an int, or a tensorrt.plugin
    ``ShapeExpr`` that is the constant 0; ``is_constant`` is a property, ``constant_value`` a method).

    While TensorRT infers output types it passes fake ``ShapeExpr``s, whose values cannot be read (``is_fake``; their
    ``is_constant`` raises). There every rank-1 input counts as a placeholder: placeholders are rank 1, and an output's
    type does not depend on a real rank-1 optional input (DeformConv2d's bias) whose presence is checked, like every
    shape, when TensorRT asks for the output shapes with real expressions.
    """
    if len(shape) != 1:
        return False
    dim = shape[0]
    if isinstance(dim, int):
        return dim == 0
    if dim.is_fake:
        return True
    return bool(dim.is_constant) and dim.constant_value() == 0


def _present(spec: OpSpec, tensors: Sequence[Any], shapes: Sequence[Sequence[Any]] | None = None) -> list[Any]:
    """The tensors without the trailing empty placeholders of absent optional inputs."""
    shapes = shapes if shapes is not None else [tuple(t.shape) for t in tensors]
    count = len(tensors)
    while count > len(spec.inputs) - len(spec.optional_inputs) and _is_empty(shapes[count - 1]):
        count -= 1
    return list(tensors[:count])


def _tensorrt_plugin() -> tuple[Any, Any]:
    """(tensorrt, tensorrt.plugin), or MissingDependencyError saying what to install."""
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise MissingDependencyError(failure(
            f"the Python plugins need TensorRT, which does not import here ({exc})", "tensorrt >= 10.6",
            _INSTALL_HINT)) from None
    try:
        import tensorrt.plugin as trtp
    except ImportError as exc:
        raise MissingDependencyError(failure(
            f"tensorrt {getattr(trt, '__version__', '?')} has no tensorrt.plugin ({exc})",
            "tensorrt >= 10.6, which provides tensorrt.plugin (register, impl, autotune)", _INSTALL_HINT)) from None
    missing = [name for name in ("register", "impl", "autotune", "AutoTuneCombination", "TensorDesc", "Tensor",
                                 "from_shape_expr") if not hasattr(trtp, name)]
    if missing:
        raise MissingDependencyError(failure(
            f"tensorrt.plugin of tensorrt {getattr(trt, '__version__', '?')} lacks {missing}",
            "tensorrt >= 10.6", _INSTALL_HINT))
    return trt, trtp


@functools.lru_cache(maxsize=None)
def _dtype_maps() -> tuple[dict[torch.dtype, Any], dict[Any, torch.dtype]]:
    import tensorrt as trt

    to_trt = {torch.float32: trt.DataType.FLOAT, torch.float16: trt.DataType.HALF, torch.bfloat16: trt.DataType.BF16,
              torch.int32: trt.DataType.INT32, torch.int64: trt.DataType.INT64, torch.bool: trt.DataType.BOOL}
    return to_trt, {v: k for k, v in to_trt.items()}


def _trt_dtype(dtype: torch.dtype) -> Any:
    return _dtype_maps()[0][dtype]


def _torch_dtype(trt_dtype: Any) -> torch.dtype:
    mapping = _dtype_maps()[1]
    if trt_dtype not in mapping:
        raise OpDefinitionError(f"TensorRT type {trt_dtype} has no torch dtype counterpart here")
    return mapping[trt_dtype]


def _attr_annotation(kind: str) -> Any:
    """The tensorrt.plugin attribute annotation of an OpSpec attribute kind.

    A scalar is declared as a 1-element array of the dtype its Python type would declare (int64, float64): the
    creator's fields, hence what TensorRT's parser fills and the engine serializes, are the same, and every release
    reads them back, where releases before 11.2 read an ``int``/``float`` attribute as ``int(array)``, which numpy
    >= 2.4 refuses.
    """
    annotations = {"int": np.ndarray[Any, np.dtype[np.int64]], "float": np.ndarray[Any, np.dtype[np.float64]],
                   "str": str, "ints": np.ndarray[Any, np.dtype[np.int32]],
                   "floats": np.ndarray[Any, np.dtype[np.float32]]}
    return annotations[kind]


def _canonical_attrs(spec: OpSpec, shapes: list[tuple], dtypes: list[torch.dtype], attrs: dict[str, Any]
                     ) -> dict[str, Any]:
    """Attributes as the op definition canonicalizes them for these inputs (e.g. a non-negative axis)."""
    attrs = {a.name: _plain(attrs[a.name], a.kind) for a in spec.attrs}
    return spec.prepare(shapes, dtypes, **attrs) if spec.prepare is not None else attrs


def _plain(value: Any, kind: str) -> Any:
    """Python scalars/lists from what tensorrt.plugin hands over (numpy arrays; a scalar is a 1-element one)."""
    if kind == "int":
        return int(np.asarray(value).item())
    if kind == "float":
        return float(np.asarray(value).item())
    if kind in ("ints", "floats"):
        return [int(v) if kind == "ints" else float(v) for v in np.asarray(value).ravel()]
    return value


def _output_descs(spec: OpSpec, trtp: Any, tensors: Sequence[Any], attrs: dict[str, Any]) -> Any:
    """The register function's body: OpSpec.shape_rule on TensorRT's shape expressions."""
    shapes = [tuple(t.shape_expr) for t in tensors]
    present = _present(spec, tensors, shapes)
    shapes = shapes[:len(present)]
    dtypes = [_torch_dtype(t.dtype) for t in present]
    canonical = _canonical_attrs(spec, shapes, dtypes, attrs)
    outputs = spec.shape_rule(shapes, dtypes, **canonical)
    descs = [trtp.from_shape_expr(tuple(shape), dtype=_trt_dtype(dtype)) for shape, dtype in outputs]
    return descs[0] if len(descs) == 1 else tuple(descs)


class _RuntimeDim:
    """A dimension known only at run time: -1 in the dims TensorRT gives autotune (``desc.dims``; the range is in
    min/max). Arithmetic on it stays unknown, so the op's checks skip it as they skip symbolic dims (an int -1 would
    be checked as a size), as the C++ plugins do."""

    def _unknown(self, *_: Any) -> _RuntimeDim:
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __rfloordiv__ = _unknown

    def __repr__(self) -> str:
        return "?"


_RUNTIME_DIM = _RuntimeDim()


def _type_combinations(spec: OpSpec, trtp: Any, tensors: Sequence[Any], attrs: dict[str, Any]) -> list[Any]:
    """One LINEAR combination per dtype of the op definition: all inputs of that dtype, outputs by the rule."""
    shapes = [tuple(t.shape) for t in tensors]
    shapes = [tuple(_RUNTIME_DIM if d < 0 else d for d in shape)
              for shape in shapes[:len(_present(spec, tensors, shapes))]]
    combinations = []
    for dtype in spec.dtypes:
        if dtype not in _AUTOTUNE_NAMES:
            continue
        dtypes = [dtype] * len(shapes)
        canonical = _canonical_attrs(spec, shapes, dtypes, attrs)
        out_dtypes = [d for _, d in spec.shape_rule(shapes, dtypes, **canonical)]
        if not all(d in _AUTOTUNE_NAMES for d in out_dtypes):
            continue
        names = [_AUTOTUNE_NAMES[dtype]] * len(tensors) + [_AUTOTUNE_NAMES[d] for d in out_dtypes]
        combinations.append(trtp.AutoTuneCombination(", ".join(names), "LINEAR"))
    return combinations


def _buffer(tensor: Any) -> Buffer:
    """The raw buffer of a tensorrt.plugin Tensor (LINEAR, so contiguous)."""
    return Buffer(int(tensor.data_ptr), tuple(int(d) for d in tensor.shape), _torch_dtype(tensor.dtype))


def _served_ops() -> list[OpSpec]:
    """The ops that get a Python plugin: ours (not TensorRT-provided), with a launcher."""
    return [op.spec for op in registered_ops().values()
            if op.spec.launch is not None and op.spec.plugin_ref.provider == PROVIDER_OURS]


def plugin_functions(spec: OpSpec, trtp: Any) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """(register, autotune, impl) functions of ``spec`` with the signatures tensorrt.plugin validates.

    register: ``(x: TensorDesc, <attr>: <type>, ...) -> TensorDesc``; autotune: ``(x, <attrs>, outputs)``; impl:
    ``(x, <attrs>, outputs, stream)``. Raises OpDefinitionError for an op tensorrt.plugin cannot express.
    """
    n_in, n_out = len(spec.inputs), len(spec.outputs)
    attr_names = [a.name for a in spec.attrs]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    tensor_params = [inspect.Parameter(name, kind, annotation=trtp.TensorDesc) for name in spec.inputs]
    attr_params = [inspect.Parameter(a.name, kind, annotation=_attr_annotation(a.kind)) for a in spec.attrs]
    out_desc = trtp.TensorDesc if n_out == 1 else typing.Tuple[(trtp.TensorDesc,) * n_out]  # noqa: UP006

    def register(*args: Any, **kwargs: Any) -> Any:
        bound = register.__signature__.bind(*args, **kwargs)  # type: ignore[attr-defined]
        values = list(bound.arguments.values())
        return _output_descs(spec, trtp, values[:n_in], dict(zip(attr_names, values[n_in:])))

    register.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        tensor_params + attr_params, return_annotation=out_desc)

    def autotune(*args: Any, **kwargs: Any) -> list[Any]:
        bound = autotune.__signature__.bind(*args, **kwargs)  # type: ignore[attr-defined]
        values = list(bound.arguments.values())
        return _type_combinations(spec, trtp, values[:n_in], dict(zip(attr_names, values[n_in:n_in + len(attr_names)])))

    outputs_desc = inspect.Parameter("outputs", kind, annotation=typing.Tuple[(trtp.TensorDesc,) * n_out])  # noqa: UP006
    autotune.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(annotation=inspect.Parameter.empty) for p in tensor_params] + attr_params + [outputs_desc],
        return_annotation=list[trtp.AutoTuneCombination])

    launch = spec.launch
    if launch is None:
        raise OpDefinitionError(f"op {spec.name} has no launcher (OpSpec.launch), so no Python plugin")

    def impl(*args: Any, **kwargs: Any) -> None:
        bound = impl.__signature__.bind(*args, **kwargs)  # type: ignore[attr-defined]
        values = list(bound.arguments.values())
        inputs, attrs = values[:n_in], dict(zip(attr_names, values[n_in:n_in + len(attr_names)]))
        outputs, stream = bound.arguments["outputs"], bound.arguments["stream"]
        present = [_buffer(t) for t in _present(spec, inputs)]
        canonical = _canonical_attrs(spec, [b.shape for b in present], [b.dtype for b in present], attrs)
        buffers = present + [None] * (n_in - len(present))
        launch(buffers, [_buffer(t) for t in outputs], int(stream), **canonical)

    impl.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(annotation=inspect.Parameter.empty) for p in tensor_params] + attr_params
        + [inspect.Parameter("outputs", kind, annotation=typing.Tuple[(trtp.Tensor,) * n_out]),  # noqa: UP006
           inspect.Parameter("stream", kind, annotation=int)],
        return_annotation=None)
    for fn, role in ((register, "register"), (autotune, "autotune"), (impl, "impl")):
        fn.__name__ = fn.__qualname__ = f"{spec.name}_{role}"
    return register, autotune, impl


def plugin_id(spec: OpSpec) -> str:
    """``<namespace>::<Name>``: namespace and name of the C++ creator (tensorrt.plugin fixes the version at "1")."""
    return f"{spec.plugin_ref.namespace}::{spec.name}"


def _already_registered(trtp: Any, spec: OpSpec) -> bool:
    namespace = getattr(getattr(trtp, "op", None), spec.plugin_ref.namespace, None)
    try:
        return namespace is not None and hasattr(namespace, spec.name)
    except Exception:  # noqa: BLE001 - tensorrt.plugin namespaces raise on unknown attributes
        return False


def register_python_plugins() -> list[str]:
    """Register every torchtrt_ext op of ours that has a launcher as a TensorRT Python plugin; return their ids.

    Idempotent (ops already registered in this process are skipped). Raises MissingDependencyError without
    TensorRT >= 10.6.
    """
    _, trtp = _tensorrt_plugin()
    served = _served_ops()
    if spec_version_mismatch := [spec.name for spec in served if spec.version != "1"]:
        raise OpDefinitionError(f"ops {spec_version_mismatch}: tensorrt.plugin registers version '1' only")
    registered = []
    for spec in served:
        registered.append(plugin_id(spec))
        if _already_registered(trtp, spec):
            continue
        register, autotune, impl = plugin_functions(spec, trtp)
        trtp.register(plugin_id(spec))(register)
        trtp.autotune(plugin_id(spec))(autotune)
        trtp.impl(plugin_id(spec))(impl)
    return registered
