"""--plugin-library on the torchtrt-ext command (build, inspect, validate). In-process (``cli.main``, what the console
script exits with), except the build without the library: a subprocess starts with an empty plugin registry, so it
really meets TensorRT-RTX's parser without the creator."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchtrt_ext import cli
from torchtrt_ext._files import file_sha256
from torchtrt_ext.errors import ExitCode

pytestmark = pytest.mark.trt_headers
REPO = Path(__file__).resolve().parents[2]
MODEL = "tests.byo_op.conftest:make_conv_scale2"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def onnx_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    path = tmp_path / "conv_scale2.onnx"
    code, _, err = run(capsys, "export", MODEL, "--input-shape", "x:1x3x8x8", "-o", str(path), "-q")
    assert code == 0, err
    return path


def test_build_inspect_and_validate_name_the_library(rtx: str, mycorp_library: Path, onnx_file: Path,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine = tmp_path / "conv_scale2.engine"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    without = subprocess.run([sys.executable, "-m", "torchtrt_ext.cli", "build", str(onnx_file), "-o", str(engine),
                              "--backend", rtx, "-q"], cwd=REPO, env=env, text=True, capture_output=True, timeout=300)
    assert without.returncode == ExitCode.BUILD, without.stderr
    assert "mycorp::Scale2" in without.stderr and "--plugin-library PATH" in without.stderr

    code, out, err = run(capsys, "build", str(onnx_file), "-o", str(engine), "--backend", rtx, "-q", "--json",
                         "--plugin-library", str(mycorp_library))
    assert code == 0, err
    data = json.loads(out)
    assert data["options"]["plugin_libraries"] == [{"name": mycorp_library.name,
                                                    "sha256": file_sha256(mycorp_library)}]
    assert data["plugin_plan"]["user_ops"] == [{"op": "Scale2", "version": "1", "namespace": "mycorp",
                                                "library": mycorp_library.name}]

    code, out, err = run(capsys, "inspect", str(engine))
    assert code == 0, err
    assert "plugin mycorp::Scale2:1: your library libmycorp_plugins.so" in out
    assert f"built with your plugin library {mycorp_library.name} (sha256 {file_sha256(mycorp_library)[:12]}" in out

    code, _, err = run(capsys, "validate", MODEL, str(engine), "--input-shape", "x:1x3x8x8")
    assert code == ExitCode.MISSING, err
    assert f"built with the plugin library {mycorp_library.name}" in err and "--plugin-library PATH" in err


def test_inspect_lists_the_creators_each_library_registers(rtx: str, mycorp_library: Path, onnx_file: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "inspect", str(onnx_file), "--backend", rtx, "--plugin-library", str(mycorp_library),
                         "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ok"]
    assert data["plugin_libraries"] == [{"library": mycorp_library.name, "creators": [
        {"name": "Scale2", "version": "1", "namespace": "mycorp", "serves": ["/Scale2"]}]}]
    code, out, _ = run(capsys, "inspect", str(onnx_file), "--backend", rtx)
    assert "plugin_libraries=[path] (--plugin-library PATH)" in out and "/Scale2" in out
