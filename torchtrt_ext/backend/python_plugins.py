"""The torchtrt_ext ops as TensorRT Python plugins (``tensorrt.plugin``, TensorRT >= 10.6).

The fallback where the C++ plugin library is not built (pip's TensorRT ships no headers). Each op is registered as
``torchtrt_ext::<Name>``: the name, version ("1") and namespace of the C++ creator, so the ONNX parser's plugin
fallback finds it from the same node (it passes the creator's fields, i.e. the op's attributes). Nothing about an op
is written again here:

* the output shapes and dtypes come from the op definition (``OpSpec.prepare`` and ``OpSpec.shape_rule``), applied
  to TensorRT's symbolic shape expressions;
* the supported types are ``OpSpec.dtypes`` (LINEAR format only, output types from the same rule);
* the implementation calls the op's kernel in ``libtorchtrt_ext_kernels.so`` through ctypes on TensorRT's stream
  (``_KERNEL_CALLS`` below: one line per op).

Optional inputs: ``tensorrt.plugin`` fixes a plugin's inputs, so an op with optional inputs (DeformConv2d: bias,
mask) is registered with all of them, and :func:`complete_optional_inputs` (run on the graph before parsing in
``plugins="python"``) gives every node the missing ones as empty 1-D tensors of the node's dtype; the plugin treats an
empty optional input as absent (the shape rule and the kernel never see it).

Entry point: :func:`register_python_plugins` (``plugins="python"``, and ``"auto"`` without the C++ library).
``tensorrt`` is imported only when it is called.
"""
from __future__ import annotations

import functools
import inspect
import math
import typing
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
import torch
from onnx import helper

from torchtrt_ext import _native
from torchtrt_ext.errors import MissingDependencyError, OpDefinitionError, failure
from torchtrt_ext.ops import DOMAIN, OpSpec, registered_ops

_AUTOTUNE_NAMES = {torch.float32: "FP32", torch.float16: "FP16", torch.bfloat16: "BF16"}
_INSTALL_HINT = "pip install 'torchtrt_ext[trt]' (TensorRT >= 10.6), or use plugins='cpp' / plugins='decompose'"

KernelCall = Callable[[OpSpec, Sequence[Any], Sequence[Any], dict[str, Any], int], None]


def _launch_l2norm(spec: OpSpec, inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict[str, Any],
                   stream: int) -> None:
    """The L2Norm kernel on TensorRT's buffers (LINEAR, so contiguous): the launcher of ops/_l2norm_cuda.py."""
    from torchtrt_ext.ops._l2norm_cuda import _LAUNCHERS, _launcher, view_sizes

    x, y = inputs[0], outputs[0]
    shape = tuple(int(d) for d in x.shape)
    if math.prod(shape) == 0:
        return
    dtype = _torch_dtype(x.dtype)
    outer, reduced, inner = view_sizes(shape, attrs["axis"])
    status = _launcher(dtype)(x.data_ptr, y.data_ptr, outer, reduced, inner, float(attrs["eps"]), stream)
    _native.check_kernel_status(
        status, f"{_LAUNCHERS[dtype]}(outer={outer}, reduced={reduced}, inner={inner}) in the {spec.name} Python plugin",
        "an earlier CUDA error may be pending (run with CUDA_LAUNCH_BLOCKING=1 to find it)")


def _launch_deform_conv2d(spec: OpSpec, inputs: Sequence[Any], outputs: Sequence[Any], attrs: dict[str, Any],
                          stream: int) -> None:
    """The DeformConv2d full-op launcher (sampling + our GEMM) on TensorRT's buffers, with a workspace allocated here
    (torch's caching allocator, recorded on TensorRT's stream so it is not reused before the kernels finish)."""
    from torchtrt_ext.ops._deform_conv2d_full import launch, workspace_size

    present = _present(spec, inputs)
    x, offset, weight = present[:3]
    bias = present[3] if len(present) > 3 else None
    mask = present[4] if len(present) > 4 else None
    y = outputs[0]
    if math.prod(int(d) for d in y.shape) == 0:
        return
    dtype = _torch_dtype(x.dtype)
    x_shape, w_shape = tuple(int(d) for d in x.shape), tuple(int(d) for d in weight.shape)
    conv = (attrs["stride"], attrs["padding"], attrs["dilation"], attrs["groups"], attrs["offset_groups"])
    nbytes = workspace_size(x_shape, w_shape, *conv, dtype)
    device = torch.device("cuda", torch.cuda.current_device())
    workspace = torch.empty(max(1, nbytes), dtype=torch.uint8, device=device)
    workspace.record_stream(torch.cuda.ExternalStream(stream, device=device))
    launch(dtype, x.data_ptr, offset.data_ptr, weight.data_ptr, None if bias is None else bias.data_ptr,
           None if mask is None else mask.data_ptr, y.data_ptr, workspace.data_ptr(), nbytes, x_shape, w_shape, *conv,
           stream, f"the {spec.name} Python plugin")


# Op name -> how its plugin calls its kernel. Adding an op to the Python plugins is one line here.
_KERNEL_CALLS: dict[str, KernelCall] = {"L2Norm": _launch_l2norm, "DeformConv2d": _launch_deform_conv2d}


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


def complete_optional_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose torchtrt_ext nodes have every optional input: missing ones become empty 1-D tensors of
    the node's first input's dtype (a Constant of shape [0] cast like it), which the Python plugins treat as absent.

    Needed because a ``tensorrt.plugin`` plugin has a fixed number of inputs. Nodes of ops without optional inputs,
    and complete nodes, are unchanged.
    """
    model = onnx.ModelProto.FromString(model.SerializeToString())
    specs = {op.spec.name: op.spec for op in registered_ops().values() if op.spec.optional_inputs}

    def fix(graph: Any) -> None:
        nodes = []
        for node in graph.node:
            for attr in node.attribute:  # subgraphs (If/Loop bodies)
                for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    fix(sub)
            spec = specs.get(node.op_type) if node.domain == DOMAIN else None
            missing = len(spec.inputs) - len(node.input) if spec is not None else 0
            if missing > 0:
                stem = f"{node.name or node.output[0]}_absent"
                nodes.append(helper.make_node("Constant", [], [f"{stem}_f32"], name=f"{stem}_const",
                                              value=helper.make_tensor(f"{stem}_value", 1, [0], [])))
                nodes.append(helper.make_node("CastLike", [f"{stem}_f32", node.input[0]], [stem], name=f"{stem}_cast"))
                node.input.extend([stem] * missing)
            nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)

    fix(model.graph)
    return model


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
    """The tensorrt.plugin attribute annotation of an OpSpec attribute kind."""
    annotations = {"int": int, "float": float, "str": str,
                   "ints": np.ndarray[Any, np.dtype[np.int32]], "floats": np.ndarray[Any, np.dtype[np.float32]]}
    return annotations[kind]


def _canonical_attrs(spec: OpSpec, shapes: list[tuple], dtypes: list[torch.dtype], attrs: dict[str, Any]
                     ) -> dict[str, Any]:
    """Attributes as the op definition canonicalizes them for these inputs (e.g. a non-negative axis)."""
    attrs = {a.name: _plain(attrs[a.name], a.kind) for a in spec.attrs}
    return spec.prepare(shapes, dtypes, **attrs) if spec.prepare is not None else attrs


def _plain(value: Any, kind: str) -> Any:
    """Python scalars/lists from what tensorrt.plugin hands over (numpy values)."""
    if kind == "int":
        return int(value)
    if kind == "float":
        return float(value)
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


def _type_combinations(spec: OpSpec, trtp: Any, tensors: Sequence[Any], attrs: dict[str, Any]) -> list[Any]:
    """One LINEAR combination per dtype of the op definition: all inputs of that dtype, outputs by the rule."""
    shapes = [tuple(t.shape) for t in tensors]
    shapes = shapes[:len(_present(spec, tensors, shapes))]
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

    launch = _KERNEL_CALLS[spec.name]

    def impl(*args: Any, **kwargs: Any) -> None:
        bound = impl.__signature__.bind(*args, **kwargs)  # type: ignore[attr-defined]
        values = list(bound.arguments.values())
        inputs, attrs = values[:n_in], dict(zip(attr_names, values[n_in:n_in + len(attr_names)]))
        outputs, stream = bound.arguments["outputs"], bound.arguments["stream"]
        present = _present(spec, inputs)
        shapes = [tuple(int(d) for d in t.shape) for t in present]
        canonical = _canonical_attrs(spec, shapes, [_torch_dtype(t.dtype) for t in present], attrs)
        launch(spec, inputs, outputs, canonical, int(stream))

    impl.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(annotation=inspect.Parameter.empty) for p in tensor_params] + attr_params
        + [inspect.Parameter("outputs", kind, annotation=typing.Tuple[(trtp.Tensor,) * n_out]),  # noqa: UP006
           inspect.Parameter("stream", kind, annotation=int)],
        return_annotation=None)
    for fn, role in ((register, "register"), (autotune, "autotune"), (impl, "impl")):
        fn.__name__ = fn.__qualname__ = f"{spec.name}_{role}"
    return register, autotune, impl


def plugin_id(spec: OpSpec) -> str:
    """``torchtrt_ext::<Name>``: namespace and name of the C++ creator (tensorrt.plugin fixes the version at "1")."""
    return f"{DOMAIN}::{spec.name}"


def _already_registered(trtp: Any, spec: OpSpec) -> bool:
    namespace = getattr(getattr(trtp, "op", None), DOMAIN, None)
    try:
        return namespace is not None and hasattr(namespace, spec.name)
    except Exception:  # noqa: BLE001 - tensorrt.plugin namespaces raise on unknown attributes
        return False


def register_python_plugins() -> list[str]:
    """Register every torchtrt_ext op that has a kernel call as a TensorRT Python plugin; return their ids.

    Idempotent (ops already registered in this process are skipped). Raises MissingDependencyError without
    TensorRT >= 10.6.
    """
    _, trtp = _tensorrt_plugin()
    if spec_version_mismatch := [op.spec.name for op in registered_ops().values()
                                 if op.spec.name in _KERNEL_CALLS and op.spec.version != "1"]:
        raise OpDefinitionError(f"ops {spec_version_mismatch}: tensorrt.plugin registers version '1' only")
    registered = []
    for op in registered_ops().values():
        spec = op.spec
        if spec.name not in _KERNEL_CALLS:
            continue
        registered.append(plugin_id(spec))
        if _already_registered(trtp, spec):
            continue
        register, autotune, impl = plugin_functions(spec, trtp)
        trtp.register(plugin_id(spec))(register)
        trtp.autotune(plugin_id(spec))(autotune)
        trtp.impl(plugin_id(spec))(impl)
    return registered
