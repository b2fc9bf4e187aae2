"""What an export prints (issue 33, items 13 and 14): the exporters' own output (FX graphs, tracer warnings, C++
warnings) is captured and logged at DEBUG (the CLI's --verbose); the user sees one line saying what dynamo rejected."""
from __future__ import annotations

import logging
import re

import pytest
import torch

import torchtrt_ext
from torchtrt_ext.errors import ExportError


class Branch(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # data-dependent: torch.export rejects it, the legacy tracer records one branch
            return x * 2
        return x - 1


class NonTensorOutput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        return x * 2, 3


class Plain(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def test_fallback_prints_one_line_naming_what_dynamo_rejected(capfd: pytest.CaptureFixture[str],
                                                               caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="torchtrt_ext"):
        torchtrt_ext.export_onnx(Branch().eval(), (torch.randn(2, 3),))
    out = capfd.readouterr()
    assert out.out == "" and out.err == "", out.err[-3000:]  # no FX graph, no torch warnings on the terminal
    (warning,) = [r for r in caplog.records if r.name == "torchtrt_ext" and r.levelno >= logging.WARNING]
    message = warning.getMessage()
    assert "\n" not in message
    assert re.search(r"dynamo exporter: .*data-dependent expression .* at test_export_messages\.py:\d+ "
                     r"`if x\.sum\(\) > 0:`", message), message
    debug = "\n".join(r.getMessage() for r in caplog.records if r.name == "torchtrt_ext")
    assert "def forward" in debug  # the exporter's own output is kept for --verbose


def test_non_tensor_output_is_named() -> None:
    with pytest.raises(ExportError, match=r"output 'output_1' of NonTensorOutput is an int \(3\), not a tensor.*"
                                          r"Remedy: return it as a tensor"):
        torchtrt_ext.export_onnx(NonTensorOutput().eval(), (torch.randn(2, 3),))


def test_legacy_export_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """No "Custom opset domain: 'torchtrt_ext' provided is not used" on every legacy export."""
    model = torchtrt_ext.export_onnx(Plain().eval(), (torch.randn(2, 3),), exporter="legacy")
    assert capfd.readouterr().err == ""
    assert "torchtrt_ext" not in {o.domain for o in model.opset_import}  # no custom node, no custom opset import


def test_custom_node_keeps_its_opset_under_the_legacy_exporter() -> None:
    model = torchtrt_ext.export_onnx(torchtrt_ext.nn.L2Norm(dim=1).eval(), (torch.randn(2, 3, 4, 4),),
                                     exporter="legacy")
    assert {(o.domain, o.version) for o in model.opset_import} >= {("torchtrt_ext", 1)}
    assert any(n.domain == "torchtrt_ext" for n in model.graph.node)
