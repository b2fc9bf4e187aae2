"""The CLI on a machine with one of the two backends (issue 33, item 15): a build with the missing one says how to use
the installed one, as compile() does."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from torchtrt_ext import cli
from torchtrt_ext.errors import ExitCode

ONLY_RTX = importlib.util.find_spec("tensorrt") is None and importlib.util.find_spec("tensorrt_rtx") is not None


@pytest.mark.skipif(not ONLY_RTX, reason="needs TensorRT-RTX installed and full TensorRT not")
def test_build_with_the_default_backend_names_the_installed_one(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "relu.onnx")
    code = cli.main(["build", str(tmp_path / "relu.onnx"), "-o", str(tmp_path / "relu.engine"), "-q"])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == ExitCode.MISSING
    remedy = line.split("Remedy:", 1)[1]
    assert "--backend tensorrt_rtx" in remedy and "pip install 'torchtrt_ext[trt]'" in remedy, line
