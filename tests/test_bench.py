"""benchmark(): rows in order with P50/P95/mean/throughput and speedup against the first row, a labelled host-timer
CPU mode, CUDA events on a GPU, failing candidates reported, ONNX candidates run by onnxruntime."""
from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

import torchtrt_ext
from torchtrt_ext.bench import BenchmarkReport, benchmark, percentile
from torchtrt_ext.errors import InvalidInputError


def _sleep(ms: float):
    def run(x: torch.Tensor) -> torch.Tensor:
        time.sleep(ms / 1e3)
        return x
    return run


def test_cpu_mode_rows_and_speedup() -> None:
    x = torch.randn(4, 8)
    report = benchmark({"slow": _sleep(4.0), "fast": _sleep(0.5)}, x, warmup=2, iters=15)
    assert report.mode == "cpu" and report.batch_size == 4 and not report.failed
    slow, fast = report.rows
    assert [slow.name, fast.name] == ["slow", "fast"] and slow.speedup == 1.0
    assert fast.speedup > 2 and slow.p50_ms >= 4.0 and slow.p50_ms <= slow.p95_ms
    assert slow.throughput == pytest.approx(4 / (slow.p50_ms / 1e3))
    table = report.to_table()
    assert "host timer (CPU mode" in table and "speedup = P50 of the first row (slow) / P50" in table
    data = json.loads(json.dumps(report.to_json()))
    assert data["mode"] == "cpu" and [r["name"] for r in data["rows"]] == ["slow", "fast"]


def test_failing_candidate_is_a_row() -> None:
    def broken(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("no engine here\nsecond line")
    report = benchmark({"broken": broken, "ok": lambda x: x + 1}, (torch.randn(2),), warmup=0, iters=3)
    assert report.failed == ["broken"] and report.row("broken").error == "RuntimeError: no engine here"
    assert report.row("ok").speedup == 1.0  # ratios against the first row that ran
    assert "FAILED: RuntimeError: no engine here" in report.to_table()


def test_groups_merge_into_one_table() -> None:
    x = torch.randn(2, 3)
    a = benchmark({"add": lambda t: t + 1}, x, warmup=0, iters=2, group="batch 2")
    b = benchmark({"add": lambda t: t + 1}, torch.randn(8, 3), warmup=0, iters=2, group="batch 8")
    merged = BenchmarkReport.concat([a, b])
    assert merged.row("add", "batch 8").group == "batch 8" and merged.to_table().splitlines()[1].startswith("group")


def test_onnx_candidate_runs_on_onnxruntime(tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    model = torchtrt_ext.nn.L2Norm().eval()
    path = tmp_path / "l2.onnx"
    torchtrt_ext.export_onnx(model, (torch.randn(2, 4, 3, 3),), path)
    report = benchmark({"eager": model, "onnxruntime": str(path)}, torch.randn(2, 4, 3, 3), warmup=1, iters=3)
    assert not report.failed, report.to_table()


def test_percentile_matches_numpy() -> None:
    samples = [5.0, 1.0, 3.0, 2.0, 4.0, 10.0, 7.5]
    for q in (0, 50, 95, 100):
        assert percentile(samples, q) == pytest.approx(float(np.percentile(samples, q)))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"candidates": {}}, "benchmark got no candidates"),
    ({"iters": 0}, r"iters=0\. Expected: warmup >= 0 and iters >= 1"),
    ({"device": "tpu"}, r"device='tpu'"),
])
def test_bad_arguments(kwargs: dict, match: str) -> None:
    args = {"candidates": {"id": lambda x: x}, **kwargs}
    with pytest.raises(InvalidInputError, match=match):
        benchmark(args.pop("candidates"), torch.randn(2), **args)


def test_cuda_mode_refused_without_a_gpu() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(InvalidInputError, match="without a CUDA GPU.*device='cpu'"):
        benchmark({"id": lambda x: x}, torch.randn(2), device="cuda")


@pytest.mark.gpu
def test_cuda_events_time_gpu_work() -> None:
    x = torch.randn(4096, 4096, device="cuda")
    report = benchmark({"matmul": lambda t: t @ t, "add": lambda t: t + 1}, x, warmup=3, iters=10)
    assert report.mode == "cuda" and "CUDA events around every run" in report.to_table()
    assert report.row("add").speedup > 1  # an add is faster than a 4096^3 matmul
