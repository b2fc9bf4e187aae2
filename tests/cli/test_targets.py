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


def _engine_with_a_user_library(path: Path, library: Path, target: Target = Target("tensorrt_rtx", "1.7.1")) -> Path:
    """An engine for ``target`` whose custom node is served by the user's plugin library ``library`` (recorded by name
    and SHA-256), with a stand-in plan: the library check happens before TensorRT reads it."""
    from torchtrt_ext.backend.plugin_plan import PluginPlan, UserOpPlan
    from torchtrt_ext.backend.user_libraries import user_libraries

    recorded = user_libraries([library])
    meta = EngineMetadata(inputs=(TensorInfo("x", "float32", (1, 3, 8, 8)),),
                          outputs=(TensorInfo("y", "float32", (1, 8, 8, 8)),), profiles=(),
                          options=BuildOptions(backend="tensorrt_rtx", plugin_libraries=recorded),
                          target=target,
                          plugin_plan=PluginPlan("none", user_ops=(UserOpPlan("MyOp", "1", "mycorp", library.name),)))
    return Engine(b"stand-in plan", meta).save(path)


def test_an_engine_needing_a_plugin_library_not_given_is_refused_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """An engine built with the user's plugin library: without --plugin-library naming that file (same SHA-256),
    validate refuses it before anything else, naming the library; with it, the command goes on to the next check
    (no GPU: a stand-in for torch's answer, so that the next check is the same on every machine)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    library = tmp_path / "libmycorp.so"
    library.write_bytes(b"the user's plugin library")
    path = _engine_with_a_user_library(tmp_path / "model.engine", library)
    other = tmp_path / "elsewhere" / "libmycorp.so"
    other.parent.mkdir()
    other.write_bytes(b"another build of it")
    for given in ([], ["--plugin-library", str(other)]):
        assert cli.main([*_argv("validate", path), *given]) == ExitCode.MISSING
        line = capsys.readouterr().err
        assert "built with the plugin library libmycorp.so" in line and "--plugin-library" in line
    code = cli.main([*_argv("validate", path), "--plugin-library", str(library)])
    line = capsys.readouterr().err
    assert "plugin library" not in line and code == ExitCode.MISSING and "needs a CUDA GPU" in line  # no GPU here


def test_inspect_checks_a_named_plugin_library_against_the_engine(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """inspect shows an engine needing the user's plugin library without it; given --plugin-library, it checks that
    file as loading the engine would (same SHA-256), so a script learns before deploying that the file is another."""
    library = tmp_path / "libmycorp.so"
    library.write_bytes(b"the user's plugin library")
    path = _engine_with_a_user_library(tmp_path / "model.engine", library)
    assert cli.main(["inspect", str(path)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "plugin mycorp::MyOp:1: your library libmycorp.so" in out and "--plugin-library PATH" in out
    assert cli.main(["inspect", str(path), "--plugin-library", str(library)]) == ExitCode.OK
    other = tmp_path / "elsewhere" / "libmycorp.so"
    other.parent.mkdir()
    other.write_bytes(b"another build of it")
    capsys.readouterr()
    assert cli.main(["inspect", str(path), "--plugin-library", str(other)]) == ExitCode.MISSING
    assert "a different file was given" in capsys.readouterr().err


def test_the_device_of_each_device_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """--device: auto is cuda where torch sees a GPU (always for an engine), else cpu; cuda and cuda:N need a GPU
    (exit 3); anything else is bad input (exit 2). torch's answer is a stand-in, so both machines are checked here."""
    import torch

    from torchtrt_ext.cli._targets import device_for
    from torchtrt_ext.errors import NoGPUError

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device_for("auto", ["model", "onnx"]) == device_for("cpu", ["model"]) == torch.device("cpu")
    for choice in ("cuda", "cuda:1"):
        with pytest.raises(NoGPUError, match=f"--device {choice} but torch sees no CUDA GPU") as raised:
            device_for(choice, ["model"])
        assert cli.error_line(raised.value).endswith("Remedy: use --device cpu")
    with pytest.raises(NoGPUError, match="running an engine needs a CUDA GPU") as raised:
        device_for("cpu", ["model", "engine"])
    assert "Remedy: run it on the target GPU, or compare with the ONNX export" in cli.error_line(raised.value)
    for bad in ("gpu", "CUDA", "cuda:", "cuda:x", "cuda:1:2"):
        with pytest.raises(cli.CliError, match=f"--device {bad!r} is not a device"):
            device_for(bad, ["model"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert device_for("auto", ["model"]) == device_for("auto", ["onnx", "engine"]) == torch.device("cuda")
    assert device_for("cuda:1", ["model"]) == torch.device("cuda:1") and device_for("cpu", ["onnx"]).type == "cpu"


@pytest.mark.parametrize("suffix", [".engine", ".plan", ".trt"])
def test_a_missing_engine_path_with_a_colon_is_a_missing_file_not_a_model_spec(suffix: str, tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A model spec is module:factory, but an engine path may hold a colon too (a folder named run:3): a missing
    engine file is reported as a missing file, not imported as a module."""
    missing = tmp_path / "run:3" / f"model{suffix}"
    assert cli.main(["validate", MODEL, str(missing)]) == ExitCode.USAGE
    line = capsys.readouterr().err
    assert f"{missing} does not exist. Remedy: check the path" in line and "cannot import" not in line


def _carrying_host_code(path: Path) -> Path:
    """``path``'s engine file rewritten to record an embedded plugin library (host code)."""
    import dataclasses

    engine = Engine.load(path)
    return Engine(engine.plan, dataclasses.replace(engine.metadata, plugins_embedded=True)).save(path)


@pytest.mark.parametrize("command", COMMANDS)
def test_allow_engine_host_code_lets_an_engine_carrying_host_code_past_the_refusal(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An engine carrying host code (an embedded plugin library) is refused (exit 2) unless
    --allow-engine-host-code is given; with it, the command goes on to the next check (no GPU: torch's answer a
    stand-in, so that the next check is the same on every machine)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    path = _carrying_host_code(_engine(tmp_path / "model.engine", Target("tensorrt_rtx", "1.7.1")))
    assert cli.main(_argv(command, path)) == ExitCode.USAGE
    assert "--allow-engine-host-code" in capsys.readouterr().err
    assert cli.main([*_argv(command, path), "--allow-engine-host-code"]) == ExitCode.MISSING
    line = capsys.readouterr().err
    assert "needs a CUDA GPU" in line and "host code" not in line


def test_an_engine_target_opens_as_a_trt_module_with_the_flags_given(rtx: str, tmp_path: Path) -> None:
    """An engine file opens as a TRTModule (which reads the plan at its first call: nothing here needs a GPU) with
    --allow-engine-host-code and --plugin-library; its declared inputs come from the engine's metadata. An ONNX file
    opens on onnxruntime, in a worker process unless isolated=False (what timing needs)."""
    import onnx
    import torch
    from onnx import TensorProto, helper

    from torchtrt_ext.backend.adapter import load_backend
    from torchtrt_ext.cli._targets import declared_inputs, open_target
    from torchtrt_ext.runtime import TRTModule

    library = tmp_path / "libmycorp.so"
    library.write_bytes(b"the user's plugin library")
    path = _carrying_host_code(_engine_with_a_user_library(tmp_path / "model.engine", library,
                                                           Target(rtx, load_backend(rtx).version)))
    kind, module = open_target(str(path), torch.device("cpu"), torch.float32, True, [str(library)])
    assert kind == "engine" and isinstance(module, TRTModule) and module.metadata == Engine.load(path).metadata
    assert module.allow_engine_host_code is True and module.plugin_libraries == (str(library),)
    assert declared_inputs(module) == [("x", (1, 3, 8, 8), torch.float32)]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx_path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), onnx_path)
    for isolated in (True, False):
        kind, module = open_target(str(onnx_path), torch.device("cpu"), torch.float32, False, isolated=isolated)
        assert kind == "onnx" and module.isolated is isolated
    assert open_target(str(onnx_path), torch.device("cpu"), torch.float32, False)[1].isolated is True


def test_engines_carrying_host_code_or_needing_a_user_library_open_given_the_flags(
        rtx: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """validate (an engine carrying host code and one needing the user's plugin library, in either role) given
    --allow-engine-host-code and --plugin-library, and bench given --allow-engine-host-code, open the engines past
    both refusals: what stops the command is then the GPU itself (torch's answer a stand-in here), not a refusal."""
    import torch

    from torchtrt_ext.backend.adapter import load_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    here = Target(rtx, load_backend(rtx).version)
    library = tmp_path / "libmycorp.so"
    library.write_bytes(b"the user's plugin library")
    mycorp = str(_engine_with_a_user_library(tmp_path / "mycorp.engine", library, here))
    host_code = str(_carrying_host_code(_engine(tmp_path / "model.engine", here)))
    flags = ["--allow-engine-host-code", "--plugin-library", str(library)]
    for argv in (["validate", host_code, mycorp, *flags], ["validate", mycorp, host_code, *flags],
                 ["bench", host_code, "--allow-engine-host-code"]):
        cli.main(argv)
        line = capsys.readouterr().err
        assert line and "carries host code" not in line and "built with the plugin library" not in line
