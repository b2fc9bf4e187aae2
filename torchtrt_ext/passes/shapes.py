"""ONNX shape inference that passes through torchtrt_ext nodes, using each op's shape and dtype rule."""
from __future__ import annotations

import onnx
from onnx import helper

from torchtrt_ext.ops._spec import DOMAIN, SymDim, get_op, onnx_elem_type, torch_dtype


def _known_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    graph = model.graph
    types = {v.name: v.type for v in list(graph.input) + list(graph.value_info) + list(graph.output)}
    for init in graph.initializer:
        types.setdefault(init.name, helper.make_tensor_type_proto(init.data_type, list(init.dims)))
    return types


def _dims(type_proto: onnx.TypeProto) -> tuple | None:
    tensor = type_proto.tensor_type
    if not tensor.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else SymDim(d.dim_param or None) for d in tensor.shape.dim)


def _to_onnx_dims(shape: tuple) -> list[int | str | None]:
    return [d.name if isinstance(d, SymDim) else int(d) for d in shape]


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Run ONNX shape inference, filling the outputs of torchtrt_ext nodes from their op's rule, to a fixpoint."""
    model = onnx.shape_inference.infer_shapes(model)
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
        model = onnx.shape_inference.infer_shapes(model)
    return model
