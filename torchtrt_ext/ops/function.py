"""An op's decomposition as one ONNX model-local function: domain ``torchtrt_ext``, name = the op_type, the op's
attributes declared (with their defaults) and the body generic over them (attribute references, ``ref_attr_name``)
and over input shapes (``Shape``/``Range``/... at run time).

A node of the op in a file that carries its function runs everywhere: a runtime with our plugin takes the plugin, any
other inlines the body (onnxruntime, a TensorRT without our library). TensorRT-RTX's parser ignores
``FunctionProto.overload``, so there is exactly one body per op and it must hold no node's values
(docs/design.md#onnx-contract).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx
from onnx import helper

from torchtrt_ext.ops.spec import ATTRIBUTE_TYPES, DOMAIN, AttrRef, Decomposer, OpSpec

# Attributes the exporter writes on every node for TensorRT's plugin lookup; declared so a node's full attribute set
# is the function's, never read by a body.
PLUGIN_ATTRIBUTES = ("plugin_version", "plugin_namespace")


def input_pattern(node: onnx.NodeProto) -> tuple[bool, ...]:
    """Which of the op's inputs a node has (an absent optional input is missing or the empty name)."""
    return tuple(bool(name) for name in node.input)


def op_function(spec: OpSpec, opset: int, present: Sequence[bool] | None = None,
                attrs: Mapping[str, Any] | None = None) -> onnx.FunctionProto:
    """The function of ``spec`` at ``opset`` (the calling model's default-domain opset) for nodes whose inputs are
    ``present`` (``input_pattern``; default: the required inputs only).

    ``attrs``: None (the generic body, every attribute a reference) or one node's validated attributes (a body
    specialised to them, only ever inlined into that node). Raises ``BakedAttributeError`` where the decomposition
    uses an attribute's value in Python (then the op has no generic body).
    """
    if present is None:
        present = tuple(name not in spec.optional_inputs for name in spec.inputs)
    count = len(present)
    while count and not present[count - 1]:
        count -= 1
    formal = list(spec.inputs[:count])
    values = dict(attrs) if attrs is not None else {a.name: AttrRef(a.name, a.kind) for a in spec.attrs}
    d = Decomposer(opset=opset, prefix="")  # short names: the body is stored in the file; inlining prefixes them
    spec.decompose(d, [name if present[i] else "" for i, name in enumerate(formal)], list(spec.outputs), **values)
    defaults = [helper.make_attribute(a.name, list(a.default) if isinstance(a.default, tuple) else a.default,
                                      attr_type=ATTRIBUTE_TYPES[a.kind]) for a in spec.attrs if not a.required]
    defaults += [helper.make_attribute("plugin_version", spec.plugin_ref.version),
                 helper.make_attribute("plugin_namespace", spec.plugin_ref.namespace)]
    return helper.make_function(DOMAIN, spec.name, formal, list(spec.outputs), d.nodes,
                                [helper.make_opsetid("", opset)],
                                attributes=[a.name for a in spec.attrs if a.required], attribute_protos=defaults,
                                doc_string=f"{spec.name}'s decomposition into standard ONNX ops (torchtrt_ext)")
