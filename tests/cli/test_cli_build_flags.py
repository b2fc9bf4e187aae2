"""Build flags that used to be taken silently (issue 33, item 14): a timing cache on TensorRT-RTX, an input named twice
in one shape list, an absurd workspace; and a graph that reads a tensor nothing provides, refused by name."""
from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from torchtrt_ext import cli
from torchtrt_ext.backend.engine import Engine
from torchtrt_ext.errors import ExitCode


def _relu(path: Path, source: str = "x") -> Path:
    graph = helper.make_graph([helper.make_node("Relu", [source], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _error(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_rtx") is None, reason="tensorrt_rtx is not installed")
def test_a_timing_cache_on_rtx_is_refused_with_the_remedy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["build", str(_relu(tmp_path / "m.onnx")), "-o", str(tmp_path / "m.engine"), "-q",
                     "--backend", "tensorrt_rtx", "--timing-cache", str(tmp_path / "t.cache")])
    line = _error(capsys)
    assert code == ExitCode.USAGE and "--timing-cache with --backend tensorrt_rtx" in line
    assert "Remedy: drop --timing-cache" in line and not (tmp_path / "m.engine").exists()


@pytest.mark.parametrize("flag", ["--min-shapes", "--opt-shapes", "--max-shapes"])
def test_an_input_named_twice_in_a_shape_list_is_refused(flag: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    shapes = {"--min-shapes": "x:1x4", "--opt-shapes": "x:1x4", "--max-shapes": "x:1x4"}
    shapes[flag] = "x:1x4,x:2x4"
    args = [a for pair in shapes.items() for a in pair]
    code = cli.main(["build", str(_relu(tmp_path / "m.onnx")), "-o", str(tmp_path / "m.engine"), "-q", *args])
    line = _error(capsys)
    assert code == ExitCode.USAGE and "'x' twice" in line and "Remedy:" in line


def test_an_input_shape_named_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["export", "tests.cli.models:make_head", "--input-shape", "x:1x3x8x8", "--input-shape", "x:2x3x8x8",
                     "-o", str(tmp_path / "m.onnx")])
    assert code == ExitCode.USAGE and "'x' twice" in _error(capsys)


def test_an_absurd_workspace_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["build", str(_relu(tmp_path / "m.onnx")), "-o", str(tmp_path / "m.engine"), "-q",
                     "--backend", "tensorrt_rtx", "--workspace", "99999999999"])
    line = _error(capsys)
    assert code == ExitCode.USAGE and "--workspace 99999999999" in line and "Remedy:" in line


def test_validate_names_a_tensor_nothing_provides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    bad = _relu(tmp_path / "bad.onnx", source="z")
    code = cli.main(["validate", "tests.cli.models:make_relu_normalize", str(bad), "--input-shape", "x:1x4"])
    line = _error(capsys)
    assert code == ExitCode.USAGE and "reads 'z'" in line and "Remedy:" in line


def _dynamic_relu(path: Path) -> Path:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize(("flags", "profile"), [
    ({"--opt-shapes": "x:3x4"}, ((3, 4), (3, 4), (3, 4))),  # trtexec's --shapes: one static profile
    ({"--min-shapes": "x:1x4", "--max-shapes": "x:8x4"}, ((1, 4), (8, 4), (8, 4))),  # opt defaults to max
    ({"--min-shapes": "x:1x4", "--opt-shapes": "x:2x4", "--max-shapes": "x:8x4"}, ((1, 4), (2, 4), (8, 4))),
], ids=["opt alone", "min and max", "all three"])
def test_the_shape_flags_make_the_profile(rtx: str, flags: dict[str, str], profile: tuple[tuple[int, ...], ...],
                                          tmp_path: Path) -> None:
    engine_path = tmp_path / "m.engine"
    args = [a for pair in flags.items() for a in pair]
    assert cli.main(["build", str(_dynamic_relu(tmp_path / "m.onnx")), "-o", str(engine_path), "-q", "--backend", rtx,
                     *args]) == ExitCode.OK
    (built,) = Engine.load(engine_path).metadata.profiles
    assert (built["x"].min, built["x"].opt, built["x"].max) == profile


@pytest.mark.parametrize(("flags", "said"), [
    ({"--min-shapes": "x:1x4"}, "--min-shapes and --max-shapes go together"),
    ({"--max-shapes": "x:8x4"}, "--min-shapes and --max-shapes go together"),
    ({"--min-shapes": "x:1x4", "--opt-shapes": "x:2x4"}, "--min-shapes and --max-shapes go together"),
    ({"--min-shapes": "x:1x4", "--max-shapes": "y:8x4"}, "name different inputs"),
    ({"--min-shapes": "x:1x4", "--opt-shapes": "y:2x4", "--max-shapes": "x:8x4"}, "name different inputs"),
    ({"--min-shapes": "x:1x4", "--opt-shapes": "x:2x4", "--max-shapes": "x:8x4,y:8x4"}, "name different inputs"),
], ids=["min alone", "max alone", "no max", "other names", "other opt names", "one more in max"])
def test_incomplete_or_mismatched_shape_flags_are_refused(flags: dict[str, str], said: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    args = [a for pair in flags.items() for a in pair]
    code = cli.main(["build", str(_dynamic_relu(tmp_path / "m.onnx")), "-o", str(tmp_path / "m.engine"), "-q", *args])
    line = _error(capsys)
    assert code == ExitCode.USAGE and said in line and "Remedy:" in line and not (tmp_path / "m.engine").exists()


@pytest.mark.parametrize(("text", "value"), [("1", 1), ("4096", 4096), (" 8 ", 8), ("0", None), ("-1", None),
                                             ("1.5", None), ("lots", None), ("", None)])
def test_workspace_takes_integers_from_1(text: str, value: int | None) -> None:
    """--workspace's argparse type: what it takes, and the error argparse turns into its one-line usage error."""
    from torchtrt_ext.cli._args import positive_int

    if value is None:
        with pytest.raises(argparse.ArgumentTypeError, match="is not an integer >= 1"):
            positive_int(text)
    else:
        assert positive_int(text) == value


def test_the_workspace_cap_is_the_gpus_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """--workspace (MiB) up to the memory of the GPU torch uses, else up to 1 TiB; torch's answers are stand-ins, so
    both machines are checked here."""
    import types

    import torch

    from torchtrt_ext.cli import build

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert build._workspace_bytes(build.MAX_WORKSPACE_MIB) == build.MAX_WORKSPACE_MIB << 20
    with pytest.raises(cli.CliError, match=f"more than {build.MAX_WORKSPACE_MIB} MiB"):
        build._workspace_bytes(build.MAX_WORKSPACE_MIB + 1)
    gpus = {1: types.SimpleNamespace(total_memory=80 << 30)}  # the second GPU is the current one
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: gpus[index])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: {1: "NVIDIA H200"}[index])
    assert build._workspace_bytes(80 << 10) == 80 << 30
    with pytest.raises(cli.CliError, match="more than the 81920 MiB of NVIDIA H200"):
        build._workspace_bytes((80 << 10) + 1)
