"""Engine files given to ``validate`` and ``bench`` (cli/_targets.py): the documented exit codes for a corrupt engine
(2) and for an engine built for another TensorRT or GPU (3), found before anything runs, with the one line naming
what is wrong."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchtrt_ext import cli
from torchtrt_ext.backend.engine import Engine, EngineMetadata, TensorInfo
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.errors import ExitCode

MODEL = "tests.cli.models:make_head"
# the engine first: the targets open in order, and a model moved to a stand-in GPU would fail before it
COMMANDS = {"validate": ["validate", "{engine}", MODEL], "bench": ["bench", "{engine}", MODEL]}


def _argv(command: str, engine: Path) -> list[str]:
    return [arg.format(engine=engine) for arg in COMMANDS[command]]


def _engine(path: Path, target: Target) -> Path:
    """An engine file for ``target`` with a stand-in plan: every check here happens before TensorRT reads it."""
    meta = EngineMetadata(inputs=(TensorInfo("x", "float32", (1, 3, 8, 8)),),
                          outputs=(TensorInfo("y", "float32", (1, 8, 8, 8)),), profiles=(),
                          options=BuildOptions(backend=target.backend), target=target)
    return Engine(b"stand-in plan", meta).save(path)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("damage", ["truncated", "flipped byte"])
def test_a_corrupt_engine_exits_2(command: str, damage: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = _engine(tmp_path / "model.engine", Target("tensorrt_rtx", "1.7.1"))
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        del data[len(data) // 2:]
    else:
        data[-40] ^= 1
    path.write_bytes(bytes(data))
    assert cli.main([*_argv(command, path), "--json"]) == ExitCode.USAGE
    captured = capsys.readouterr()
    assert json.loads(captured.out)["exit_code"] == ExitCode.USAGE
    why = "sizes in the header" if damage == "truncated" else "checksum mismatch"
    assert f"{path} is not a valid torchtrt_ext engine file: {why}" in captured.err and "Remedy: " in captured.err


@pytest.mark.parametrize("command", COMMANDS)
def test_an_engine_for_another_tensorrt_exits_3(command: str, rtx: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """On a machine whose TensorRT-RTX is not the engine's: refused when the engine is opened, before inputs are made
    or anything is timed. The GPU is a stand-in (torch.cuda.is_available): the version check comes before any GPU
    call, and without a GPU the command would stop earlier, at 'needs a CUDA GPU' (also exit 3)."""
    import torch

    from torchtrt_ext.backend.adapter import load_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    path = _engine(tmp_path / "model.engine", Target(rtx, "0.9.0", "NVIDIA H200", "9.0"))
    assert cli.main([*_argv(command, path), "--input-shape", "x:1x3x8x8"]) == ExitCode.MISSING
    err = capsys.readouterr().err
    here = load_backend(rtx)
    assert f"the engine was built with tensorrt_rtx 0.9.0, this machine has {here.name} {here.version}" in err
    assert "Remedy: rebuild the engine on the target machine" in err
