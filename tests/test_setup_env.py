"""scripts/setup_env.sh is incremental (issue 33, item 16): a second run with nothing changed skips the installs
(and the nvcc build inside `pip install -e .`); a change to what they depend on, a missing library or a fresh venv
runs them again.

The venv's python is a stand-in that records its pip calls (our own orchestration is under test, not pip), in a copy
of the script beside a small tree with the files the stamp covers."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

from tests.plugins import real_trtp

REPO = Path(__file__).resolve().parents[1]

_STAND_IN_PYTHON = """#!/bin/sh
# stand-in for the venv's python: records pip calls, answers the version questions setup_env.sh asks
case "$*" in
  *"pip install"*) echo "$*" >> "$(dirname "$0")/../pip.log" ;;
  "--version") echo "Python 3.11.7" ;;
  *) echo "torch 2.13.0" ;;
esac
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup_env.sh", root / "scripts" / "setup_env.sh")
    for name, text in {"pyproject.toml": "[project]\n", "setup.py": "# setup\n", "csrc/kernels/a.cu": "// a\n",
                       "torchtrt_ext/lib/libtorchtrt_ext_plugins.so": "\x7fELF",
                       **{f".deps/tensorrt-plugin-{release}/tensorrt_bindings/plugin/__init__.py": ""
                          for release in real_trtp.RELEASES}}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(_STAND_IN_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    return root


def _installs(root: Path) -> int:
    """Run setup_env.sh; return how many pip installs it ran."""
    log = root / ".venv" / "pip.log"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHTRT_EXT_", "TORCH_SPEC", "EXTRAS", "VENV"))}
    done = subprocess.run(["bash", "scripts/setup_env.sh"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_second_run_skips_the_installs_until_something_changes(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert _installs(root) == 2  # no stamp yet (a fresh clone, CI): torch, then the package with its build
    assert _installs(root) == 0
    (root / "csrc" / "kernels" / "a.cu").write_text("// a, changed\n")
    assert _installs(root) == 2
    assert _installs(root) == 0
    (root / "torchtrt_ext" / "lib" / "libtorchtrt_ext_plugins.so").unlink()  # a library gone: build again
    assert _installs(root) == 2
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert _installs(root) == 2
    (root / ".venv" / ".torchtrt_ext_setup_stamp").unlink()
    assert _installs(root) == 2


def test_a_failed_install_leaves_no_stamp(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    python = root / ".venv" / "bin" / "python"
    python.write_text(_STAND_IN_PYTHON.replace('>> "$(dirname "$0")/../pip.log" ;;', '>> "$(dirname "$0")/../pip.log"; '
                                               'exit 1 ;;'))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHTRT_EXT_", "TORCH_SPEC", "EXTRAS", "VENV"))}
    done = subprocess.run(["bash", "scripts/setup_env.sh"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert not (root / ".venv" / ".torchtrt_ext_setup_stamp").exists()
