"""Remedies that say each thing once and never suggest what the user already did (issue 20, item 13)."""
from __future__ import annotations

import importlib.util

import onnx
import pytest
import torch
from onnx import TensorProto, helper

import torchtrt_ext
from torchtrt_ext.doctor import report
from torchtrt_ext import _native
from torchtrt_ext.errors import BuildError, LibraryNotFoundError


class Head(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torchtrt_ext.ops.l2norm(torch.relu(x), dim=1)


def test_doctor_on_rtx_without_the_plugin_library_says_each_remedy_once(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> None:
        raise LibraryNotFoundError("libtorchtrt_ext_plugins.so not found. Expected: it. Remedy: build it")

    monkeypatch.setattr(_native, "plugin_library_path", missing)
    model = torchtrt_ext.export_onnx(Head(), (torch.randn(2, 8),))
    result = report(model, backend="tensorrt_rtx", checker="table")
    (finding,) = [f for f in result.findings if f.op_type == "L2Norm"]
    assert finding.problem
    build_it = [r for r in finding.remedies if "libtorchtrt_ext_plugins.so" in r]
    assert len(build_it) == 1, finding.remedies  # RTX takes the C++ plugins: build them, said once
    assert len(set(finding.remedies)) == len(finding.remedies)


def _foreign_node_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Warp", ["r"], ["y"], domain="acme")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("acme", 1)])


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_rtx") is None,
                    reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
def test_decompose_with_a_foreign_node_does_not_advise_decompose() -> None:
    with pytest.raises(BuildError) as info:
        torchtrt_ext.build_engine(_foreign_node_model(), backend="tensorrt_rtx", plugins="decompose", progress=False)
    text = str(info.value)
    assert "acme::Warp" in text and "Remedy:" in text
    assert "plugins='decompose'" not in text.split("Remedy:")[1], text
