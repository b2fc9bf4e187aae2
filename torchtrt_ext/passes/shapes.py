"""ONNX shape inference that passes through torchtrt_ext nodes, using each op's shape and dtype rule."""
from __future__ import annotations

import math

import onnx
from google.protobuf.message import EncodeError
from onnx import helper

from torchtrt_ext.ops.spec import DOMAIN, Shape, SymDim, get_op, onnx_elem_type, torch_dtype
from torchtrt_ext.passes.onnx_util import OnnxSource, read_onnx


def _known_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    graph = model.graph
    types = {v.name: v.type for v in list(graph.input) + list(graph.value_info) + list(graph.output)}
    for init in graph.initializer:
        types.setdefault(init.name, helper.make_tensor_type_proto(init.data_type, list(init.dims)))
    return types


def _dims(type_proto: onnx.TypeProto) -> Shape | None:
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else SymDim(d.dim_param or None) for d in tensor.shape.dim)


def _to_onnx_dims(shape: Shape) -> list[int | str | None]:
    return [d.name if isinstance(d, SymDim) else int(d) for d in shape]


#: protobuf cannot serialize a message of 2 GiB or more (onnx raises EncodeError); shape inference and the checker
#: serialize the model, so a bigger model goes through ``weightless`` and is saved with external data.
PROTOBUF_LIMIT = 2**31 - 1
_SMALL = 1 << 14  # elements of the initializers ``weightless`` keeps (Reshape shapes, Slice starts: values inference reads)


def too_big(model: onnx.ModelProto) -> bool:
    """Whether ``model`` is over protobuf's 2 GiB serialization limit."""
    try:
        size: int = model.ByteSize()
        return size >= PROTOBUF_LIMIT
    except EncodeError:  # protobuf refuses even to size a message over the limit
        return True


def weightless(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each large initializer turned into a graph input of the same name, type and shape: small
    enough to serialize, and all that shape inference and the checker need of the weights."""
    graph = model.graph
    small = [i for i in graph.initializer if math.prod(i.dims) < _SMALL]  # elements: sizing one may raise too
    large = [helper.make_tensor_value_info(i.name, i.data_type, list(i.dims)) for i in graph.initializer
             if math.prod(i.dims) >= _SMALL]
    light = helper.make_graph(graph.node, graph.name, list(graph.input) + large, graph.output, small,
                              value_info=graph.value_info)
    return helper.make_model(light, opset_imports=model.opset_import, ir_version=model.ir_version,
                             producer_name=model.producer_name, producer_version=model.producer_version,
                             functions=model.functions)


def _onnx_infer(model: onnx.ModelProto) -> onnx.ModelProto:
    if not too_big(model):
        return onnx.shape_inference.infer_shapes(model)
    inferred = onnx.shape_inference.infer_shapes(weightless(model))
    del model.graph.value_info[:]
    model.graph.value_info.extend(inferred.graph.value_info)
    for ours, theirs in zip(model.graph.output, inferred.graph.output):
        ours.CopyFrom(theirs)
    return model


def infer_shapes(model: OnnxSource) -> onnx.ModelProto:
    """Run ONNX shape inference on ``model`` (a ModelProto, path or bytes), filling the outputs of torchtrt_ext nodes
    from their op's rule, to a fixpoint.

    A model over 2 GiB is inferred through ``weightless`` and updated in place.
    """
    model = _onnx_infer(read_onnx(model))
    custom = [n for n in model.graph.node if n.domain == DOMAIN]
    for _ in range(len(custom) + 1):
        types = _known_types(model)
        added = False
        for node in custom:
            present = [name for name in node.input if name]
            if any(name not in types or _dims(types[name]) is None for name in present):
                continue
            shapes = [_dims(types[name]) for name in present]
            dtypes = [torch_dtype(types[name].tensor_type.elem_type) for name in present]
            spec = get_op(node.op_type).spec
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in
                     {x.name for x in spec.attrs}}
            for name, (shape, dtype) in zip(node.output, spec.shape_rule(shapes, dtypes, **attrs)):
                new = helper.make_tensor_value_info(name, onnx_elem_type(dtype), _to_onnx_dims(shape))
                existing = [v for v in model.graph.value_info if v.name == name]
                if existing and existing[0].type == new.type:
                    continue
                for v in existing:
                    model.graph.value_info.remove(v)
                if name not in {o.name for o in model.graph.output}:
                    model.graph.value_info.append(new)
                    added = True
        if not added:
            break
        model = _onnx_infer(model)
    return model
