"""The examples beyond the quickstart run in CI in whatever mode the machine allows, and say what they skipped."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchtrt_ext import _native
from torchtrt_ext.errors import LibraryNotFoundError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def run_example(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TORCHTRT_EXT_CACHE_DIR": str(cwd / "cache")}
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=900, cwd=cwd, env=env)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    return done


def test_detector_head(tmp_path: Path) -> None:
    out = run_example(str(EXAMPLES / "detector_head.py"), "--iters", "5", cwd=tmp_path).stdout
    assert "detector_head OK" in out
    if "skipped: compile" in out:  # CPU machine: the portable path ran and said what it skipped
        assert "custom nodes ['L2Norm']" in out and "PASS" in out


def test_training_repo_export_then_build_from_onnx_alone(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("tensorrt_rtx") is None and importlib.util.find_spec("tensorrt") is None:
        pytest.skip("neither tensorrt_rtx nor tensorrt is installed (pip install 'torchtrt_ext[rtx]')")
    out = run_example(str(EXAMPLES / "training_repo_export.py"), "all", "--out", str(tmp_path / "deploy"),
                      cwd=tmp_path).stdout
    assert "training_repo_export OK" in out
    assert (tmp_path / "deploy" / "model.engine").is_file()
    assert (tmp_path / "deploy" / "model_repository" / "embedder" / "1" / "model.plan").is_file()
    assert (tmp_path / "deploy" / "model_repository" / "embedder" / "config.pbtxt").is_file()


def test_custom_op(tmp_path: Path) -> None:
    out = run_example(str(EXAMPLES / "custom_op" / "softclip.py"), cwd=tmp_path).stdout
    assert "dynamo: ['SoftClip']" in out and "legacy: ['SoftClip']" in out
    assert "skipped: CUDA kernel and C++ plugin" in out and "custom_op OK" in out


@pytest.mark.trt_headers
def test_cpp_example_compiles(trt_include: Path, tmp_path: Path) -> None:
    """Compile (no link: libnvinfer is not on CI machines) examples/cpp/run_engine.cpp against the TensorRT headers."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++) on this machine")
    cuda = next((Path(p) for p in (os.environ.get("CUDA_HOME", ""), "/usr/local/cuda", "/usr/local/cuda-13.0")
                 if p and (Path(p) / "include" / "cuda_runtime_api.h").is_file()), None)
    if cuda is None:
        pytest.skip("CUDA headers (cuda_runtime_api.h) not found; set CUDA_HOME")
    done = subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-Wno-deprecated-declarations", "-c",
                           str(EXAMPLES / "cpp" / "run_engine.cpp"), "-I", str(trt_include), "-I",
                           str(cuda / "include"), "-o", str(tmp_path / "run_engine.o")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-5000:]
    assert (tmp_path / "run_engine.o").stat().st_size > 0


def test_cpp_example_build_files_name_the_source() -> None:
    assert "run_engine.cpp" in (EXAMPLES / "cpp" / "CMakeLists.txt").read_text()
    assert "run_engine.cpp" in (EXAMPLES / "cpp" / "Makefile").read_text()


def test_yolo_nms(tmp_path: Path) -> None:
    """The YOLO-style head: one EfficientNMS_TRT node, the decomposed export equal to eager on onnxruntime, a
    TensorRT-RTX build where our plugin can serve the node there, and the detections printed."""
    import importlib.util

    out = run_example(str(EXAMPLES / "yolo_nms.py"), cwd=tmp_path).stdout
    assert "yolo_nms OK" in out and "custom nodes ['EfficientNMS_TRT']" in out
    assert "against TinyYolo: PASS" in out
    assert "image 0:" in out and "image 1:" in out and "score" in out
    if importlib.util.find_spec("tensorrt_rtx") is not None:
        try:
            _native.plugin_library_path()
        except LibraryNotFoundError:  # no C++ plugin library: RTX has no plugin for the node (and no NMS layer)
            assert "skipped: TensorRT-RTX build (no plugin for EfficientNMS_TRT" in out
        else:  # the exported graph builds on RTX with plugins="auto", our EfficientNMS_TRT plugin inside
            assert "built with TensorRT-RTX" in out and "torchtrt_ext::EfficientNMS_TRT:1" in out
