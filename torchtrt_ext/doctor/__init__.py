"""The doctor: what TensorRT will reject in an ONNX graph, and what to do about it (``report``).

``report`` holds the diagnosis; ``trt_op_support`` (the op-support table used without a parser) and ``nms_patterns``
(NMS shapes static engines run badly) are its tables. The doctor sits above the rewrites (``passes``) and the backend,
and uses both; neither imports it.
"""
from __future__ import annotations

from torchtrt_ext.doctor.report import DoctorReport, Finding, report

__all__ = ["DoctorReport", "Finding", "report"]
