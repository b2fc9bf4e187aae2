"""Test helpers shared by several test files: running ONNX models with onnxruntime and counting nodes."""
from __future__ import annotations

import ctypes
import types
from typing import Any

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

import torchtrt_ext


def run_onnx(model: onnx.ModelProto, feeds: dict[str, torch.Tensor]) -> list[np.ndarray]:
    """Run ``model`` with onnxruntime on the CPU (skips the test when onnxruntime is missing)."""
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime is needed (pip install 'torchtrt_ext[dev]')")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.detach().cpu().numpy() for k, v in feeds.items()})


def op_types(model: onnx.ModelProto) -> list[tuple[str, str]]:
    """(domain, op_type) of every node of the main graph."""
    return [(n.domain, n.op_type) for n in model.graph.node]


def rel_err(got: np.ndarray | torch.Tensor, ref: np.ndarray | torch.Tensor) -> float:
    """Relative error ||got - ref|| / ||ref|| computed in float64."""
    got64 = torch.as_tensor(np.asarray(got, dtype=np.float64) if not isinstance(got, torch.Tensor) else got).double()
    ref64 = torch.as_tensor(np.asarray(ref, dtype=np.float64) if not isinstance(ref, torch.Tensor) else ref).double()
    return ((got64 - ref64).norm() / ref64.norm().clamp_min(1e-30)).item()


def single_custom_node(model: onnx.ModelProto) -> onnx.NodeProto:
    """The one torchtrt_ext node of the main graph (fails, listing the nodes, when there is not exactly one)."""
    nodes = [n for n in model.graph.node if n.domain == "torchtrt_ext"]
    assert len(nodes) == 1, op_types(model)
    return nodes[0]


def node_attrs(node: onnx.NodeProto) -> dict:
    """A node's attributes as Python values."""
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def kernels_library_or_skip() -> ctypes.CDLL:
    """libtorchtrt_ext_kernels.so, loaded. Where torch sees a CUDA GPU, a missing or unloadable library FAILS the test:
    a broken build must not hide behind skips there. Elsewhere (no nvcc, no CUDA runtime) the test skips with why."""
    from torchtrt_ext import _native
    from torchtrt_ext.errors import LibraryNotFoundError

    try:
        return _native.kernels_library()
    except LibraryNotFoundError as exc:
        if torch.cuda.is_available():
            pytest.fail(f"a CUDA GPU is present but the kernels library is missing or does not load: {exc}",
                        pytrace=False)
        pytest.skip(f"kernels library not built or not loadable here: {exc}")


class _StandInRegistry:
    """A stand-in plugin registry holding the creators of TensorRT's own plugin library it is given."""

    def __init__(self, creators: set[tuple[str, str, str]]) -> None:
        self.creators = creators

    def get_creator(self, name: str, version: str, namespace: str) -> object | None:
        return object() if (name, version, namespace) in self.creators else None


class _StandInILogger:
    Severity = types.SimpleNamespace(INTERNAL_ERROR=0, ERROR=1, WARNING=2, INFO=3, VERBOSE=4)


def stand_in_tensorrt(plugin_library: set[tuple[str, str, str]] | None) -> Any:
    """A stand-in TensorRT module (our orchestration only) whose own plugin library registers the given (name, version,
    namespace) creators, or which has no plugin library at all (None). Wrap it in ``TRTApi("tensorrt", ...)``."""
    module = types.ModuleType("tensorrt")  # a module, as TensorRT is (hashable: the api keys caches)
    module.__version__ = "10.13.0"
    if plugin_library is not None:
        registry = _StandInRegistry(plugin_library)
        module.init_libnvinfer_plugins = lambda logger, namespace: True  # type: ignore[attr-defined]
        module.get_plugin_registry = lambda: registry  # type: ignore[attr-defined]
        module.ILogger = _StandInILogger  # type: ignore[attr-defined]  # init_libnvinfer_plugins gets our logger
    return module


class SmallConv(torch.nn.Module):
    """Conv + relu: the plain model of the ``conv_onnx`` fixture."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class ConvL2Norm(torch.nn.Module):
    """Conv + torchtrt_ext L2Norm: the one-custom-node model of the ``l2norm_onnx`` fixture."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 1)
        self.norm = torchtrt_ext.nn.L2Norm(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.conv(x))


def raw_custom_graph(domain: str = "torchtrt_ext", op_type: str = "L2Norm") -> onnx.ModelProto:
    """A hand-made graph with one custom node, never exported: the guard must catch it on its own."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    node = helper.make_node(op_type, ["x"], ["y"], name="custom0", domain=domain, axis=1, eps=1e-6,
                            plugin_version="1", plugin_namespace="torchtrt_ext")
    imports = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(helper.make_graph([node], "raw", [x], [y]), opset_imports=imports)
