"""The torchtrt-ext command: the whole loop through subprocesses on the CPU (export -> inspect -> build on
TensorRT-RTX, decomposed -> validate and bench on onnxruntime), and every subcommand's bad-input path exiting
non-zero with a one-line reason (in-process: main() is what the console script exits with)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchtrt_ext import cli
from torchtrt_ext.backend.engine import Engine, EngineMetadata
from torchtrt_ext.backend.options import BuildOptions, Target
from torchtrt_ext.errors import BuildError
from torchtrt_ext.errors import ExitCode

REPO = Path(__file__).resolve().parents[2]
MODEL = "tests.cli.models:make_head"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "torchtrt_ext.cli", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=300)


def _rtx_reason() -> str | None:
    if importlib.util.find_spec("tensorrt_rtx") is None:
        return "tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')"
    return None


def test_export_inspect_build_validate_bench(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    onnx_path, engine_path = tmp_path / "head.onnx", tmp_path / "head.engine"

    done = _run("export", MODEL, "--input-shape", "x:2x3x16x16", "-o", str(onnx_path))
    assert done.returncode == 0, done.stderr
    assert onnx_path.is_file() and "custom nodes ['L2Norm']" in done.stdout

    done = _run("inspect", str(onnx_path), "--backend", "tensorrt_rtx", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["kind"], found["backend"], found["nodes"]) == ("onnx", "tensorrt_rtx", 2)
    assert found["native_ops"] == {"Conv": 1}  # the head's Conv runs in TensorRT itself; the L2Norm is ours
    (finding,) = found["findings"]
    assert (finding["op_type"], finding["domain"]) == ("L2Norm", "torchtrt_ext")
    assert found["ok"] is not finding["problem"]  # the one custom node decides whether the build can go ahead

    done = _run("validate", MODEL, str(onnx_path), "--input-shape", "x:3x3x16x16", "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert report["passed"] and report["outputs"][0]["name"] == "output" and report["trials"] == 3
    assert report["outputs"][0]["ref_shape"] == [3, 8, 16, 16]

    done = _run("bench", MODEL, str(onnx_path), "--input-shape", "x:2x3x16x16", "--warmup", "2", "--iters", "5",
                "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert "host timer (CPU mode" in done.stdout and f"{onnx_path} (onnxruntime)" in done.stdout

    reason = _rtx_reason()
    if reason:
        pytest.skip(f"build step: {reason}")
    done = _run("build", str(onnx_path), "-o", str(engine_path), "--backend", "tensorrt_rtx", "--plugins", "decompose",
                "--min-shapes", "x:1x3x16x16", "--opt-shapes", "x:2x3x16x16", "--max-shapes", "x:4x3x16x16")
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout and "plugins decompose" in done.stdout
    assert "[torchtrt-ext] building head.onnx with tensorrt_rtx" in done.stderr  # progress on stderr

    done = _run("inspect", str(engine_path), "--json")
    assert done.returncode == 0, done.stderr
    meta = json.loads(done.stdout)
    assert meta["kind"] == "engine" and meta["target"]["backend"] == "tensorrt_rtx"
    assert meta["plugin_plan"]["mode"] == "decompose"
    assert meta["profiles"][0]["x"]["max"] == [4, 3, 16, 16]


@pytest.mark.trt_headers
def test_build_on_rtx_with_the_cpp_plugins(tmp_path: Path, onnx_file: Path) -> None:
    """The same command with --plugins cpp: RTX's real builder, our C++ L2Norm plugin inside (library built in CI)."""
    reason = _rtx_reason()
    if reason:
        pytest.skip(reason)
    engine_path = tmp_path / "head.engine"
    done = _run("build", str(onnx_file), "-o", str(engine_path), "--backend", "tensorrt_rtx", "--plugins", "cpp")
    assert done.returncode == 0, done.stderr
    assert "plugins cpp" in done.stdout
    done = _run("inspect", str(engine_path), "--json")
    meta = json.loads(done.stdout)
    assert meta["target"]["backend"] == "tensorrt_rtx" and meta["plugin_plan"]["mode"] == "cpp"
    assert [(op["namespace"], op["op"], op["version"], op["route"]) for op in meta["plugin_plan"]["ops"]] == [
        ("torchtrt_ext", "L2Norm", "1", "cpp")]


def test_bad_input_exits_2_with_one_line_in_a_subprocess(tmp_path: Path) -> None:
    done = _run("build", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "x.engine"))
    assert done.returncode == ExitCode.USAGE and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torchtrt-ext build: error: ONNX file")
    assert lines[0].endswith("Remedy: check the path")


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    import torchtrt_ext
    from tests.cli.models import make_head

    path = tmp_path_factory.mktemp("cli") / "head.onnx"
    torchtrt_ext.export_onnx(make_head().eval(), (torch.randn(1, 3, 8, 8),), path)
    return path


def _bad_cases(onnx: str, garbage: str) -> list[tuple[list[str], str]]:
    return [
        # export
        (["export", "tests/cli/nope.py:make", "--input-shape", "x:1x3x8x8", "-o", "o.onnx"], "does not exist"),
        (["export", MODEL, "--input-shape", "x:1x3xeightx8", "-o", "o.onnx"], "bad shape '1x3xeightx8'"),
        (["export", MODEL, "-o", "o.onnx"], "export needs --input-shape"),
        (["export", "tests.cli.models:not_a_model", "--input-shape", "1x3x8x8", "-o", "o.onnx"], "not a torch.nn"),
        (["export", "tests.cli.models:nothing", "--input-shape", "1x3x8x8", "-o", "o.onnx"], "has no 'nothing'"),
        (["export", MODEL, "--input-shape", "y:1x3x8x8", "-o", "o.onnx"], "forward takes ['x']"),
        # build
        (["build", "missing.onnx", "-o", "x.engine"], "ONNX file missing.onnx does not exist"),
        (["build", onnx, "-o", "x.engine", "--min-shapes", "x:1x3", "--max-shapes", "x:1,3"], "bad shape"),
        (["build", onnx, "-o", "x.engine", "--min-shapes", "1x3x8x8", "--max-shapes", "1x3x8x8"], "no input name"),
        (["build", onnx, "-o", "x.engine", "--min-shapes", "x:1x3x8x8"], "--min-shapes and --max-shapes go together"),
        (["build", onnx, "-o", "x.engine", "--precision", "fp8"], "invalid choice: 'fp8'"),
        (["build", onnx], "the following arguments are required: -o/--output"),
        # inspect
        (["inspect", "missing.engine"], "file missing.engine does not exist"),
        (["inspect", garbage], "neither an ONNX model nor a torchtrt_ext engine"),
        # validate
        (["validate", MODEL, "missing.onnx"], "ONNX file missing.onnx does not exist"),
        (["validate", MODEL, onnx, "--input-shape", "x:1x3x8"
          "x"], "bad shape"),
        (["validate", MODEL, onnx, "--precision", "fp8"], "unknown precision 'fp8'"),
        (["validate", MODEL, garbage], "neither an .onnx file nor a torchtrt_ext engine file"),
        # bench
        (["bench", "missing.onnx"], "ONNX file missing.onnx does not exist"),
        (["bench", MODEL, "--input-shape", "x:-1x3"], "bad shape"),
        (["bench", MODEL, onnx, "--input-shape", "x:1x3x8x8", "--iters", "0"], "iters=0"),
        (["bench", MODEL, "--dtype", "int8"], "invalid choice: 'int8'"),
        # no subcommand
        ([], "the following arguments are required: COMMAND"),
    ]


def test_every_subcommand_refuses_bad_input_with_one_line(onnx_file: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"\x00not a model\xff" * 8)
    failures = []
    for argv, expected in _bad_cases(str(onnx_file), str(garbage)):
        code = cli.main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        ok = code == ExitCode.USAGE and len(err) == 1 and expected in err[0] and "Remedy:" in err[0]
        if not ok:
            failures.append(f"{argv}: exit {code}, stderr {err}")
    assert not failures, "\n".join(failures)


def test_help_on_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("export", "build", "inspect", "validate", "bench"):
        assert cli.main([command, "--help"]) == 0
        out = capsys.readouterr().out
        assert f"usage: torchtrt-ext {command}" in out and "exit codes: 0 ok; 1 validation failed" in out
    assert cli.main(["--help"]) == 0 and "validate" in capsys.readouterr().out


def test_engine_without_gpu_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    meta = EngineMetadata(inputs=(), outputs=(), profiles=(), options=BuildOptions(),
                          target=Target("tensorrt", "10.13.0"))
    engine = Engine(b"stand-in plan", meta).save(tmp_path / "valid.engine")  # read, never deserialized here
    assert cli.main(["validate", MODEL, str(engine), "--json"]) == ExitCode.MISSING
    captured = capsys.readouterr()
    assert "needs a CUDA GPU" in captured.err and json.loads(captured.out)["exit_code"] == ExitCode.MISSING


def test_validation_failure_exits_1(onnx_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    # a file spec loads the same model as the export: passes; other weights: fails, naming the output
    same = cli.main(["validate", "tests/cli/models.py:make_head", str(onnx_file), "--input-shape", "x:1x3x8x8",
                     "--trials", "1"])
    assert same == ExitCode.OK and "PASS" in capsys.readouterr().out
    other = cli.main(["validate", "tests.cli.models:make_other", str(onnx_file), "--input-shape", "x:1x3x8x8"])
    out = capsys.readouterr().out
    assert other == ExitCode.FAILED and "FAIL" in out and "output" in out


def test_shape_strings() -> None:
    assert cli.parse_named_shapes("x:1x3x64x64,y:2x8") == {"x": (1, 3, 64, 64), "y": (2, 8)}
    assert cli.parse_named_shapes("input:0:1x2") == {"input:0": (1, 2)}  # names may hold ':'
    with pytest.raises(cli.CliError, match="bad shape '1x3x'"):
        cli.parse_shape("1x3x")
