"""A copy of what setup.py builds from, with a stand-in nvcc: for the tests of setup.py's orchestration (nothing is
compiled)."""
from __future__ import annotations

import shutil
import stat
from pathlib import Path

import torchtrt_ext
from tests.plugins._plugin_harness import ROOT


def setup_tree(tmp_path: Path, nvcc_script: str) -> tuple[Path, Path]:
    """(tree, nvcc): setup.py, pyproject.toml and csrc/ copied into tmp_path/checkout beside a package holding only its
    version, and nvcc_script (a shell script standing in for nvcc) as tmp_path/nvcc."""
    tree = tmp_path / "checkout"
    tree.mkdir()
    for name in ("setup.py", "pyproject.toml"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(ROOT / "csrc", tree / "csrc")
    (tree / "torchtrt_ext").mkdir()
    (tree / "torchtrt_ext" / "__init__.py").write_text("")
    # pyproject.toml reads the version there (the tree has no package sources: write it, not copy it)
    (tree / "torchtrt_ext" / "_version.py").write_text(f'__version__ = "{torchtrt_ext.__version__}"\n')
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(nvcc_script)
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IEXEC)
    return tree, nvcc
