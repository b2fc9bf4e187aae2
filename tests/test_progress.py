"""Progress where a user waits (issue 20, item 15): export, build phases and benchmark runs print lines on stderr,
and --quiet / progress=False turns them off."""
from __future__ import annotations

import importlib.util
import io
import time

import pytest
import torch

import torchtrt_ext
from torchtrt_ext import _progress, cli

NORMALIZE = "tests.cli.models:make_relu_normalize"


def test_cli_export_shows_progress_unless_quiet(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    out = f"{tmp_path}/m.onnx"
    assert cli.main(["export", NORMALIZE, "--input-shape", "x:2x8", "-o", out]) == 0
    err = capsys.readouterr().err
    assert f"exporting {NORMALIZE} ..." in err and f"exporting {NORMALIZE} done (" in err
    assert cli.main(["export", NORMALIZE, "--input-shape", "x:2x8", "-o", out, "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_long_export_ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_progress, "TICK_S", 0.01)
    stream = io.StringIO()
    with _progress.ticking("exporting vit", stream=stream):
        time.sleep(0.1)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[torchtrt_ext] exporting vit ..." and lines[-1].startswith("[torchtrt_ext] exporting vit done")
    assert any(line.endswith(" s") and ": " in line for line in lines[1:-1])


def test_benchmark_counts_runs_unless_told_not_to(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_progress, "INTERVAL_S", 0.0)  # print every step instead of every 2 s
    model = torch.nn.Linear(4, 4)
    torchtrt_ext.benchmark({"eager": model}, (torch.randn(2, 4),), warmup=2, iters=5, device="cpu")
    lines = capsys.readouterr().err.splitlines()
    assert "[torchtrt_ext] bench eager: 1/7" in lines and "[torchtrt_ext] bench eager: 7/7" in lines
    torchtrt_ext.benchmark({"eager": model}, (torch.randn(2, 4),), warmup=2, iters=5, device="cpu", progress=False)
    assert capsys.readouterr().err == ""


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_rtx") is None,
                    reason="tensorrt_rtx is not installed (pip install 'torchtrt_ext[rtx]')")
def test_build_phases_count_their_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The IProgressMonitor TensorRT-RTX's builder calls: a phase with steps prints a step counter."""
    from torchtrt_ext.backend.adapter import load_backend

    monkeypatch.setattr(_progress, "INTERVAL_S", 0.0)
    stream = io.StringIO()
    monitor = load_backend("tensorrt_rtx").make_progress_monitor(stream)
    monitor.phase_start("Building engine", None, 0)
    monitor.phase_start("Tactic selection", "Building engine", 3)
    for step in range(3):
        assert monitor.step_complete("Tactic selection", step)
    monitor.phase_finish("Tactic selection")
    monitor.phase_finish("Building engine")
    text = stream.getvalue()
    assert "[torchtrt_ext] Tactic selection: 3/3" in text and "Building engine done" in text
