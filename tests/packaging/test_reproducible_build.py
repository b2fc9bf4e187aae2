"""The native libraries are reproducible build to build (issue 33, item 16): the engine cache keys on the plugin
library's hash, so a rebuild of the same sources must give the same bytes, or every cached engine rebuilds.

nvcc names its temporary files after its process id (``tmpxft_<pid>_...cudafe1.cpp``) and that name reaches the
library as local symbols (the file symbol, ``_GLOBAL__sub_I_tmpxft_...``); the link drops local symbols. Checked
with setup.py's own compile and link steps on the smallest kernel source, twice, in two folders."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import _setup_py


def test_two_builds_of_a_library_are_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    setup = _setup_py()
    nvcc = setup.find_nvcc()
    if nvcc is None:
        pytest.skip("nvcc is not installed: setup.py builds no native library here")
    monkeypatch.setenv("TORCHTRT_EXT_CUDA_ARCHS", "90")  # one architecture: the check, not the coverage
    source = setup.CSRC / "kernels" / "cuda_runtime_info.cu"
    built = []
    for name in ("first", "second"):
        folder = tmp_path / name
        folder.mkdir()
        objects = setup._nvcc_objects(nvcc, [source], folder, [])
        setup._nvcc_link(nvcc, objects, folder / "lib.so", [])
        built.append((folder / "lib.so").read_bytes())
    assert built[0] == built[1]
    assert b"tmpxft_" not in built[0]
