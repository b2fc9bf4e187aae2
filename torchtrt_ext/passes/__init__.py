"""ONNX graph passes: custom-op decomposition and shape inference, L2 normalization fusion, cleanup, the doctor."""
from __future__ import annotations

from torchtrt_ext.passes.cleanup import cleanup
from torchtrt_ext.passes.decompose import decompose_custom_ops
from torchtrt_ext.passes.fuse_l2norm import fuse_l2norm, fuse_l2norm_with_report
from torchtrt_ext.passes.report import DoctorReport, report
from torchtrt_ext.passes.shapes import infer_shapes

__all__ = ["DoctorReport", "cleanup", "decompose_custom_ops", "fuse_l2norm", "fuse_l2norm_with_report",
           "infer_shapes", "report"]
