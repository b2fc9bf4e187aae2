"""ONNX graph rewrites: custom-op decomposition and shape inference, L2 normalization fusion, cleanup, precision, the
optional-input completion the Python plugins need, and the plugin namespace a planned plugin needs. Nothing here
imports the backend or the doctor (they use these).

``pipeline`` is the named pre-build pipeline that ``compile`` and the CLI run on an exported model; the build then
applies the plan-dependent rewrites itself (precision, decomposition, namespaces: ``backend.builder.graph_for_build``).
"""
from __future__ import annotations

import logging

import onnx

from torchtrt_ext.passes.cleanup import cleanup
from torchtrt_ext.passes.decompose import decompose_custom_ops
from torchtrt_ext.passes.fuse_l2norm import fuse_l2norm, fuse_l2norm_with_report
from torchtrt_ext.passes.optional_inputs import complete_optional_inputs
from torchtrt_ext.passes.plugin_namespace import bind_plugin_namespaces
from torchtrt_ext.passes.precision import PRECISIONS, apply_precision
from torchtrt_ext.passes.shapes import infer_shapes

__all__ = ["PRECISIONS", "apply_precision", "bind_plugin_namespaces", "cleanup", "complete_optional_inputs",
           "decompose_custom_ops", "fuse_l2norm", "fuse_l2norm_with_report", "infer_shapes", "pipeline"]

log = logging.getLogger("torchtrt_ext")


def pipeline(model: onnx.ModelProto, fuse: bool = True) -> onnx.ModelProto:
    """The pre-build rewrites of an exported model: the fusion passes (L2 normalization patterns -> L2Norm) when
    ``fuse`` (default True), logging what they fused. Returns ``model`` itself when there is nothing to run."""
    if not fuse:
        return model
    fused, report = fuse_l2norm_with_report(model)
    log.info("fusion: %s", report.summary())
    return fused
