"""TensorRT's messages mean remedies, decided where the build fails, so API users and the command line get the same
specific remedy from the error's fields."""
from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

import torchtrt_ext
from torchtrt_ext import cli
from torchtrt_ext.backend import remedies
from torchtrt_ext.errors import BuildError, ExitCode, OnnxParseError

PLUGIN_NOT_FOUND = "load the plugin library (plugins='cpp'"


@pytest.mark.parametrize(("message", "expected"), [
    ("INVALID_NODE: Plugin not found, are the plugin name, version, and namespace correct?", "load the plugin library"),
    ("No importer registered for op: GridSample3D. Attempting to import as plugin.", "map the op to supported"),
    ("In node 3 (parseGraph): UNSUPPORTED_NODE: No importer registered for op: Foo", "map the op to supported"),
    ("[optimizer.cpp::computeCosts] Error Code 10: Internal Error (Could not find any implementation for node "
     "conv1.)", "try precision fp32 (precision='fp32' / --precision fp32), or narrow the dynamic shape range"),
    ("Error Code 1: Serialization (Serialization assertion plan->header.magicTag == rt::kPLAN_MAGIC_TAG failed.)",
     "rebuild the engine on the target GPU"),
    ("GPU compute capability 9.0 not supported by TensorRT-RTX", "rebuild the engine on the target GPU"),
    ("output 'scores' has NaN", "supportsFormatCombination"),
    ("something else entirely", None),
])
def test_tensorrt_messages_map_to_the_design_remedies(message: str, expected: str | None) -> None:
    remedy = remedies.remedy_for(message)
    assert (remedy is None) if expected is None else (expected in (remedy or "")), remedy
    if expected:  # a build failing with that message carries that remedy, and the command prints it on one line
        assert remedies.build_remedy([("WARNING", "unused input"), ("ERROR", message)]) == remedy
        error = BuildError(f"build failed:\n  {message}", remedy=remedies.build_remedy([("ERROR", message)]))
        line = cli.error_line(error)
        assert "\n" not in line and line.endswith(f"Remedy: {remedy}")


def test_a_build_failure_reads_the_errors_before_the_warnings() -> None:
    records = [("WARNING", "layer x is falling back to a slow implementation"),
               ("ERROR", "Could not find any implementation for node conv1")]
    assert "precision='fp32'" in remedies.build_remedy(records)
    assert remedies.build_remedy(records[:1]).startswith("narrow the profiles")  # the warning alone still counts
    assert remedies.build_remedy([("ERROR", "something else")]) == remedies.BUILD_REMEDY


def test_a_foreign_node_gets_the_foreign_remedy_whatever_tensorrt_said() -> None:
    said = ["Plugin not found, are the plugin name, version, and namespace correct?"]
    assert remedies.parse_remedy(said, foreign=True) == remedies.FOREIGN_REMEDY
    assert remedies.parse_remedy(said, foreign=False).startswith(PLUGIN_NOT_FOUND)
    assert remedies.parse_remedy(["[8] false"], foreign=False) == remedies.PARSE_REMEDY


def _model_with(op_type: str) -> onnx.ModelProto:
    """Relu -> ``op_type`` (a standard-domain node) on a 1x4 float input."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node(op_type, ["r"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_an_api_user_gets_the_remedy_of_tensorrts_message(rtx: str) -> None:  # noqa: F811
    """TensorRT-RTX's real parser on an op it has no importer for: it looks for a plugin of that name and says "Plugin
    not found", so the remedy is the plugin one, not the generic parse remedy; a node it rejects without a known
    message keeps the generic one."""
    with pytest.raises(OnnxParseError) as info:
        torchtrt_ext.build_engine(_model_with("Warp"), backend=rtx, plugins="decompose", progress=False)
    assert "Plugin not found" in str(info.value) and info.value.remedy.startswith(PLUGIN_NOT_FOUND), str(info.value)
    with pytest.raises(OnnxParseError) as info:
        torchtrt_ext.build_engine(_model_with("Bernoulli"), backend=rtx, plugins="decompose", progress=False)
    assert info.value.remedy == remedies.PARSE_REMEDY, str(info.value)


def test_the_command_prints_that_remedy_with_the_build_exit_code(rtx: str, tmp_path: Path,  # noqa: F811
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "warp.onnx"
    onnx.save(_model_with("Warp"), path)
    code = cli.main(["build", str(path), "-o", str(tmp_path / "warp.engine"), "--backend", rtx, "--plugins",
                     "decompose", "--quiet"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == ExitCode.BUILD == OnnxParseError.exit_code
    assert lines[-1].startswith("torchtrt-ext build: error: ") and f"Remedy: {PLUGIN_NOT_FOUND}" in lines[-1], lines
