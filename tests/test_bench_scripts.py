"""The GPU benchmark scripts stay importable and parse their arguments on any machine (they run on the H200)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


SCRIPTS = ["kernels.py", "deform_conv.py", "deform_conv_routes.py", "deform_conv_waves.py", "detector.py",
           "overhead.py"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_help(script: str) -> None:
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


@pytest.fixture()
def bench_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(BENCH))
    return BENCH


def test_median_diff_ci_separates_shifted_samples_and_contains_zero_for_a_tie(bench_path: Path) -> None:
    from _timing import median_diff_ci

    base = [5.8 + 0.01 * (i % 30) for i in range(500)]
    lo, hi = median_diff_ci(base, [t + 0.2 for t in base])
    assert -0.25 < lo <= hi < -0.15, (lo, hi)
    lo, hi = median_diff_ci(base, list(reversed(base)))
    assert lo <= 0 <= hi, (lo, hi)


def test_kernels_verdict_judges_compile_on_the_interval(bench_path: Path) -> None:
    from kernels import target_verdict

    def row(case: str, ci: tuple[float, float]) -> dict[str, object]:
        return {"case": case, "MB": 256.0, "kernel_p50": 36.7, "copy_p50": 36.7, "compile_p50": 36.7,
                "kernel_minus_compile_ci": ci}

    assert target_verdict(row("tokens_last", (-0.03, 0.06)), 1.0, compiled=True) == "ok"
    assert target_verdict(row("tokens_last", (0.03, 0.1)), 1.0, compiled=True) == "MISS: slower than compile"
    assert target_verdict(row("det_head_nchw", (-0.03, 0.03)), 1.0, compiled=True) == "MISS: not faster than compile"
    assert target_verdict(row("det_head_nchw", (-9.0, -8.0)), 1.0, compiled=True) == "ok"
    assert target_verdict(row("det_head_nchw", (-9.0, -8.0)), 1.2, compiled=True) == "MISS: kernel > 1.10×copy"


def test_deform_conv_verdicts_judge_both_plugin_inputs_and_the_eager_op(bench_path: Path) -> None:
    from deform_conv import _verdicts

    def timed(us: float, err: float = 1e-6) -> dict[str, float]:
        return {"p50_us": us, "p95_us": us, "rel_err": err}

    row = {"case": "resnet_stage", "dtype": "fp16", "plugin": timed(125.0), "plugin_cl": timed(100.0),
           "eager": timed(127.0), "best_conv": {"p50_us": 80.0}}
    verdicts = _verdicts(row)
    assert "plugin/best conv 1.56 <= 1.3: NOT MET (stretch 1.1: not met)" in verdicts
    assert "plugin_cl/best conv 1.25 <= 1.3: met (stretch 1.1: not met)" in verdicts
    assert "eager/best conv 1.59 <= 1.3: NOT MET (stretch 1.1: not met)" in verdicts
    # session 9's times were taken on NCHW inputs: only the NCHW plugin path and the eager op are held to them
    assert [v.split()[0] for v in verdicts if "session 9" in v] == ["plugin", "eager"]
    small = {"case": "small", "dtype": "fp32", "plugin": timed(20.0, 2e-5), "plugin_cl": timed(17.0),
             "eager": timed(23.0), "best_conv": {"p50_us": 14.0}}
    verdicts = _verdicts(small)
    assert "plugin/best conv 1.43 <= 1.5: met" in verdicts and "plugin_cl/best conv 1.21 <= 1.5: met" in verdicts
    assert "eager/best conv 1.64 <= 1.5: NOT MET" in verdicts
    assert "plugin err 2.0e-05 <= 1e-05: NOT MET" in verdicts and "plugin_cl err 1.0e-06 <= 1e-05: met" in verdicts


def test_deform_conv_waves_fit_recovers_a_line(bench_path: Path) -> None:
    from deform_conv_waves import fit

    slope, intercept = fit([9.0, 18.0, 36.0, 72.0], [7.5 + 1.25 * x for x in (9.0, 18.0, 36.0, 72.0)])
    assert abs(slope - 1.25) < 1e-12 and abs(intercept - 7.5) < 1e-12
    slope, intercept = fit([1.0, 2.0, 3.0], [1.0, 3.0, 2.0])  # least squares, not the end points
    assert abs(slope - 0.5) < 1e-12 and abs(intercept - 1.0) < 1e-12
