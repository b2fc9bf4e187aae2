"""The examples are run by the tests, so they cannot rot."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "custom nodes: ['L2Norm']" in done.stdout
    assert "quickstart OK" in done.stdout
    if importlib.util.find_spec("tensorrt_rtx") is not None and not torch.cuda.is_available():
        # what this machine can do, it shows: the engine built with TensorRT-RTX, then what running it needs
        assert "built a tensorrt_rtx engine" in done.stdout and "running it needs a CUDA GPU" in done.stdout
        assert "TensorRT runtime or GPU not present" not in done.stdout
