"""The GPU benchmark scripts stay importable and parse their arguments on any machine (they run on the H200)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize("script", ["kernels.py", "deform_conv.py", "deform_conv_routes.py", "detector.py", "overhead.py"])
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
