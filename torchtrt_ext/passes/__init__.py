"""ONNX graph rewrites: custom-op decomposition and shape inference, L2 normalization fusion, cleanup, precision, the
optional-input completion the Python plugins need, and the plugin namespace a planned plugin needs. Nothing here
imports the backend (the backend uses these).

``passes.report`` and ``passes.DoctorReport``, the doctor's former home, name ``torchtrt_ext.doctor.report`` and
``torchtrt_ext.doctor.DoctorReport``; they are looked up on first use, so importing the passes never loads the doctor or
the backend.
"""
from __future__ import annotations

from typing import Any

from torchtrt_ext.passes.cleanup import cleanup
from torchtrt_ext.passes.decompose import decompose_custom_ops
from torchtrt_ext.passes.fuse_l2norm import fuse_l2norm, fuse_l2norm_with_report
from torchtrt_ext.passes.optional_inputs import complete_optional_inputs
from torchtrt_ext.passes.plugin_namespace import bind_plugin_namespaces
from torchtrt_ext.passes.precision import PRECISIONS, apply_precision
from torchtrt_ext.passes.shapes import infer_shapes

__all__ = ["PRECISIONS", "DoctorReport", "apply_precision", "bind_plugin_namespaces", "cleanup",
           "complete_optional_inputs", "decompose_custom_ops", "fuse_l2norm", "fuse_l2norm_with_report", "infer_shapes", "report"]


def __getattr__(name: str) -> Any:
    """``report`` and ``DoctorReport``: the doctor's names, kept where users found them."""
    if name in ("report", "DoctorReport"):
        from torchtrt_ext import doctor

        return getattr(doctor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
