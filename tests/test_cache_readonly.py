"""An engine cache folder this process cannot write (issue 20, item 8): a valid cached engine is still used, and a
missing one is built without caching, with one warning, instead of a PermissionError on the lock file."""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx

from torchtrt_ext.cache import cached_build_engine

REPO = Path(__file__).resolve().parents[1]


def _drop_root_file_override() -> None:
    """Run as root, the child would ignore file modes: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the
    capability bounding set before exec (prctl PR_CAPBSET_DROP), so the exec'd process honours them."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def _run_without_write_access(script: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a process that cannot write ``folder`` (mode 0555; as root, without the capabilities that
    let root ignore modes)."""
    folder.chmod(0o555)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    drop = _drop_root_file_override if os.geteuid() == 0 else None
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], cwd=REPO, env=env, text=True,
                              capture_output=True, timeout=300, preexec_fn=drop)
    finally:
        folder.chmod(0o755)


def _script(model_path: Path, folder: Path, *, forbid_build: bool) -> str:
    return f"""
        import logging, sys
        from torchtrt_ext.backend import builder
        from torchtrt_ext.cache import cached_build_engine
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
        if {forbid_build}:
            def no_build(*args, **kwargs):
                raise AssertionError("built although a valid engine was cached")
            builder._build = no_build
        engine = cached_build_engine({str(model_path)!r}, backend="tensorrt_rtx", progress=False,
                                     cache={str(folder)!r})
        print("plan", len(engine.plan))
    """


def test_read_only_cache_is_still_read(rtx: str, conv_onnx: onnx.ModelProto, tmp_path: Path) -> None:
    model_path, folder = tmp_path / "conv.onnx", tmp_path / "cache"
    onnx.save(conv_onnx, str(model_path))
    first = cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    for path in folder.iterdir():  # the engine and its .lock file, as another user or a read-only image leaves them
        path.chmod(0o444)
    done = _run_without_write_access(_script(model_path, folder, forbid_build=True), folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["plan", str(len(first.plan))]
    assert "WARNING" not in done.stderr, done.stderr


def test_read_only_empty_cache_builds_with_one_warning(rtx: str, conv_onnx: onnx.ModelProto, tmp_path: Path) -> None:
    model_path, folder = tmp_path / "conv.onnx", tmp_path / "cache"
    onnx.save(conv_onnx, str(model_path))
    folder.mkdir()
    done = _run_without_write_access(_script(model_path, folder, forbid_build=False), folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("plan ")
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "cannot be written" in warnings[0] and "building without caching" in warnings[0]
    assert list(folder.iterdir()) == []


def test_a_corrupted_engine_in_a_read_only_cache_is_rebuilt(rtx: str, conv_onnx: onnx.ModelProto,
                                                            tmp_path: Path) -> None:
    """A corrupted file is deleted and rebuilt; where it cannot be deleted (a read-only cache) the build still runs,
    uncached, instead of failing on the delete."""
    model_path, folder = tmp_path / "conv.onnx", tmp_path / "cache"
    onnx.save(conv_onnx, str(model_path))
    first = cached_build_engine(conv_onnx, backend=rtx, progress=False, cache=folder)
    (engine_path,) = folder.glob("*.engine")
    data = bytearray(engine_path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in the plan
    engine_path.write_bytes(bytes(data))
    for path in folder.iterdir():
        path.chmod(0o444)
    done = _run_without_write_access(_script(model_path, folder, forbid_build=False), folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["plan", str(len(first.plan))]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert "is corrupted" in warnings[0] and "cannot be written" in warnings[1], done.stderr
    assert engine_path.read_bytes() == bytes(data)  # left as it was: nothing could be deleted or written
