"""Fixtures for the backend tests: small models, TensorRT-RTX (builds engines on a CPU), an isolated engine cache."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import onnx
import pytest
import torch
from onnx import TensorProto, helper

import torchtrt_ext
from torchtrt_ext.backend.adapter import load_backend


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own engine cache folder (never the user's ~/.cache)."""
    folder = tmp_path / "engine_cache"
    monkeypatch.setenv("TORCHTRT_EXT_CACHE_DIR", str(folder))
    monkeypatch.delenv("TORCHTRT_EXT_CACHE", raising=False)
    return folder


@pytest.fixture(scope="session")
def rtx() -> str:
    """The backend name "tensorrt_rtx", skipping where it is not installed (CI installs tensorrt-rtx-cu13)."""
    if importlib.util.find_spec("tensorrt_rtx") is None:
        pytest.skip("tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
    load_backend("tensorrt_rtx")
    return "tensorrt_rtx"


class SmallConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class ConvL2Norm(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)
        self.norm = torchtrt_ext.nn.L2Norm(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))


@pytest.fixture(scope="session")
def conv_onnx() -> onnx.ModelProto:
    """A conv + relu model, exported with a dynamic batch; its input is named "x"."""
    torch.manual_seed(0)
    return torchtrt_ext.export_onnx(SmallConv().eval(), (torch.randn(2, 3, 8, 8),))


@pytest.fixture(scope="session")
def l2norm_onnx() -> onnx.ModelProto:
    """Conv + torchtrt_ext L2Norm, exported by the project's exporter (one custom node)."""
    torch.manual_seed(0)
    model = torchtrt_ext.export_onnx(ConvL2Norm().eval(), (torch.randn(2, 3, 8, 8),))
    assert [n.op_type for n in model.graph.node if n.domain == "torchtrt_ext"] == ["L2Norm"]
    return model


def raw_custom_graph(domain: str = "torchtrt_ext", op_type: str = "L2Norm") -> onnx.ModelProto:
    """A hand-made graph with one custom node, never exported: the guard must catch it on its own."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    node = helper.make_node(op_type, ["x"], ["y"], name="custom0", domain=domain, axis=1, eps=1e-6,
                            plugin_version="1", plugin_namespace="torchtrt_ext")
    imports = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(helper.make_graph([node], "raw", [x], [y]), opset_imports=imports)
