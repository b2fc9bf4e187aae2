"""Custom ops: built-in ops and the machinery to define your own (see ``OpSpec`` and ``define_op``).

Each op is one file here; adding an op is one new file plus one import line below.
"""
from __future__ import annotations

from torchtrt_ext.ops._torch_op import CustomOp, define_op
from torchtrt_ext.ops.spec import (
    DOMAIN,
    PROVIDER_OURS,
    PROVIDER_TENSORRT,
    Attr,
    AttrRef,
    BakedAttributeError,
    Buffer,
    Decomposer,
    OpSpec,
    PluginRef,
    finite_positive,
    get_op,
    registered_ops,
)
from torchtrt_ext.ops.deform_conv2d import deform_conv2d
from torchtrt_ext.ops.efficient_nms import efficient_nms
from torchtrt_ext.ops.l2norm import l2norm

__all__ = ["DOMAIN", "PROVIDER_OURS", "PROVIDER_TENSORRT", "Attr", "AttrRef", "BakedAttributeError", "Buffer",
           "CustomOp", "Decomposer", "OpSpec", "PluginRef", "define_op", "deform_conv2d", "efficient_nms",
           "finite_positive", "get_op", "l2norm", "registered_ops"]
