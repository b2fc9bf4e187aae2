"""setup.py where TensorRT headers are absent (as in CI): the plugin library is skipped with the reason, the build
still succeeds, and plugin_library_path() then says how to build it. Runs everywhere: nvcc is replaced by a stand-in
that only creates its output, so nothing is compiled."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._setup_tree import setup_tree
from tests.conftest import trt_include_dir
from tests.plugins._plugin_harness import ROOT
from torchtrt_ext import _native
from torchtrt_ext.errors import LibraryNotFoundError

FAKE_NVCC = """#!/bin/sh
# stand-in for nvcc: say its version (setup.py records it), or create the file after -o
if [ "$1" = "--version" ]; then echo "Cuda compilation tools, release 13.0, V13.0.88"; exit 0; fi
while [ $# -gt 0 ]; do if [ "$1" = "-o" ]; then : > "$2"; exit 0; fi; shift; done
exit 1
"""


def test_setup_skips_plugin_library_without_headers(tmp_path: Path) -> None:
    tree, nvcc = setup_tree(tmp_path, FAKE_NVCC)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHTRT_EXT_TRT_INCLUDE", "TensorRT_ROOT")}
    env["TORCHTRT_EXT_NVCC"] = str(nvcc)
    env["TORCHTRT_EXT_CUDA_ARCHS"] = "90"
    # Where headers sit in a system folder or an installed TensorRT wheel, setup.py rightly finds them there (the
    # copied tree has no .deps/ and no ../shared/ beside it).
    found, _ = trt_include_dir()
    if found is not None and not any(found.is_relative_to(folder) for folder in (ROOT, ROOT.parent / "shared")):
        pytest.skip(f"TensorRT headers are installed system-wide here ({found}); the no-headers path cannot be shown")
    result = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tree, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "TensorRT headers (NvInfer.h) not found in" in result.stderr, result.stderr
    assert "libtorchtrt_ext_plugins.so skipped" in result.stderr and "TORCHTRT_EXT_TRT_INCLUDE" in result.stderr
    assert (tree / "torchtrt_ext" / "lib" / "libtorchtrt_ext_kernels.so").exists()
    assert not (tree / "torchtrt_ext" / "lib" / "libtorchtrt_ext_plugins.so").exists()
    assert "libtorchtrt_ext_plugins_autoload.so" in result.stderr
    assert not (tree / "torchtrt_ext" / "lib" / "libtorchtrt_ext_plugins_autoload.so").exists()
    assert _native.build_info(tree / "torchtrt_ext" / "lib") == {"cuda_version": "13.0", "sm": ["90a"], "ptx": "90"}
    assert "libtorchtrt_ext_rtx_alias.so" in result.stderr
    assert not (tree / "torchtrt_ext" / "lib" / "libtorchtrt_ext_rtx_alias.so").exists()


def test_missing_plugin_library_error_says_how_to_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(_native, "_PACKAGE_LIB_DIR", tmp_path)
    monkeypatch.delenv("TORCHTRT_EXT_PLUGIN_LIB", raising=False)
    monkeypatch.delenv("TORCHTRT_EXT_PLUGIN_AUTOLOAD_LIB", raising=False)
    with pytest.raises(LibraryNotFoundError, match=r"libtorchtrt_ext_plugins.so not found.*TORCHTRT_EXT_TRT_INCLUDE"):
        _native.plugin_library_path()
    with pytest.raises(LibraryNotFoundError, match=r"libtorchtrt_ext_plugins_autoload.so not found.*"
                                                   r"TORCHTRT_EXT_TRT_INCLUDE.*TORCHTRT_EXT_PLUGIN_AUTOLOAD_LIB"):
        _native.plugin_autoload_library_path()
    monkeypatch.delenv("TORCHTRT_EXT_RTX_ALIAS_LIB", raising=False)
    with pytest.raises(LibraryNotFoundError, match=r"libtorchtrt_ext_rtx_alias.so not found.*pip install -e \..*"
                                                   r"TORCHTRT_EXT_TRT_INCLUDE.*TORCHTRT_EXT_RTX_ALIAS_LIB"):
        _native.rtx_alias_library_path()
