"""The examples are run by the tests, so they cannot rot."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "custom nodes: ['L2Norm']" in done.stdout
    assert "quickstart OK" in done.stdout
