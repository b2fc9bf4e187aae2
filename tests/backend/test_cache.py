"""Engine cache: hits without building, corrupted files rebuilt, mismatched machines reported, concurrent builders."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest

from torchtrt_ext import cache as engine_cache
from torchtrt_ext.backend import Engine
from torchtrt_ext.backend import builder as builder_module
from torchtrt_ext.cache import cached_build_engine, default_cache_dir, resolve_cache_dir

REPO = Path(__file__).resolve().parents[2]


def _engines(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.engine"))


def _forbid_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_builder(*args: object, **kwargs: object) -> None:
        raise AssertionError("the TensorRT builder was invoked on what should be a cache hit")

    monkeypatch.setattr(builder_module, "engine_from_network", no_builder)


def test_second_identical_call_is_a_cache_hit(rtx: str, l2norm_onnx: onnx.ModelProto, isolated_cache: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    first = cached_build_engine(l2norm_onnx, backend=rtx, plugins="decompose", progress=False)
    assert len(_engines(isolated_cache)) == 1
    _forbid_building(monkeypatch)
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        second = cached_build_engine(l2norm_onnx, backend=rtx, plugins="decompose", progress=False)
    assert "engine cache hit" in caplog.text
    assert second.plan == first.plan and second.metadata_bytes == first.metadata_bytes


def test_other_settings_are_other_keys(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    cached_build_engine(conv_onnx, backend=rtx, progress=False, profiles={"x": ((1, 3, 8, 8),) * 3})
    assert len(_engines(isolated_cache)) == 2


def test_corrupted_cache_file_is_rebuilt_not_loaded(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    good = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (path,) = _engines(isolated_cache)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the plan
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        rebuilt = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert "is corrupted (" in caplog.text and "checksum mismatch" in caplog.text and "rebuilding" in caplog.text
    assert Engine.load(path).metadata == good.metadata  # the file is valid again
    assert rebuilt.metadata == good.metadata

    path.write_bytes(path.read_bytes()[:100])  # truncated
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert "sizes in the header" in caplog.text
    Engine.load(path)


def test_engine_for_another_machine_is_reported_plainly_and_rebuilt(rtx: str, conv_onnx: onnx.ModelProto,
                                                                     isolated_cache: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (path,) = _engines(isolated_cache)
    engine = Engine.load(path)
    # the same key's file, but its content claims another GPU and TensorRT version (e.g. copied from another box)
    engine.with_metadata(trt_version="0.9.0", gpu_name="NVIDIA H200", compute_capability="9.0").save(path)
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        rebuilt = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert "was built for tensorrt_rtx 0.9.0 on NVIDIA H200 (compute capability 9.0)" in caplog.text
    assert "but this machine has tensorrt_rtx" in caplog.text and "rebuilding" in caplog.text
    assert rebuilt.metadata.trt_version != "0.9.0"
    assert Engine.load(path).metadata.trt_version == rebuilt.metadata.trt_version


def test_sibling_engine_of_another_machine_is_mentioned(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (path,) = _engines(isolated_cache)
    model_key = path.name.split("-")[0]
    other = Engine.load(path).with_metadata(gpu_name="NVIDIA H200", compute_capability="9.0")
    other.save(isolated_cache / f"{model_key}-0000000000000000.engine")
    path.unlink()
    with caplog.at_level(logging.INFO, logger="torchtrt_ext"):
        cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert "an engine of this model exists for tensorrt_rtx" in caplog.text and "NVIDIA H200" in caplog.text


def test_cache_switches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TORCHTRT_EXT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "torchtrt_ext"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path(os.path.expanduser("~")) / ".cache" / "torchtrt_ext"
    monkeypatch.setenv("TORCHTRT_EXT_CACHE_DIR", str(tmp_path / "mine"))
    assert resolve_cache_dir(True) == tmp_path / "mine"
    assert resolve_cache_dir(tmp_path / "explicit") == tmp_path / "explicit"
    assert resolve_cache_dir(False) is None
    monkeypatch.setenv("TORCHTRT_EXT_CACHE", "0")
    assert resolve_cache_dir(True) is None


def test_disabled_cache_always_builds(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = builder_module.engine_from_network

    def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builder_module, "engine_from_network", counting)
    for _ in range(2):
        cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=False)
    assert len(calls) == 2 and not isolated_cache.exists()


def test_two_processes_building_one_key_leave_one_valid_file(rtx: str, conv_onnx: onnx.ModelProto,
                                                              tmp_path: Path) -> None:
    model_path = tmp_path / "conv.onnx"
    onnx.save(conv_onnx, str(model_path))
    folder = tmp_path / "shared_cache"
    script = textwrap.dedent(f"""
        import sys
        from torchtrt_ext.cache import cached_build_engine
        engine = cached_build_engine({str(model_path)!r}, backend="tensorrt_rtx", progress=False,
                                     cache={str(folder)!r})
        print("plan", len(engine.plan))
    """)
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=240) for p in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-2000:]
        assert out.startswith("plan ")
    engines = _engines(folder)
    assert len(engines) == 1
    Engine.load(engines[0])  # valid (checksum verified)
    leftovers = [p.name for p in folder.iterdir() if p.suffix not in (".engine", ".lock")]
    assert leftovers == []


def test_unwritable_cache_folder_still_builds(rtx: str, conv_onnx: onnx.ModelProto, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        engine = cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=blocker / "cache")
    assert len(engine.plan) > 0
    assert "engine cache" in caplog.text and "continuing without caching" in caplog.text


def test_cache_module_builds_through_the_builder_module() -> None:
    """The cache calls builder.build_engine through the module, so tests and tools can intercept the builder."""
    assert engine_cache._builder is builder_module
