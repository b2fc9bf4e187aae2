"""The GPU benchmark scripts stay importable and parse their arguments on any machine (they run on the H200)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


SCRIPTS = ["kernels.py", "deform_conv.py", "deform_conv_routes.py", "deform_conv_waves.py", "deform_conv_trace.py",
           "detector.py", "overhead.py"]


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


def test_deform_conv_trace_slots_mirror_the_kernel_header(bench_path: Path) -> None:
    from deform_conv_trace import ROW_SLOTS, ROWS, SLOTS

    header = (bench_path.parent / "csrc" / "kernels" / "deform_conv2d_trace.cuh").read_text()
    enum = header[header.index("enum TraceSlot"):header.index("};", header.index("enum TraceSlot"))]
    slots = {re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(): int(value)
             for name, value in re.findall(r"kTrace(\w+) = (\d+),", enum)}
    assert slots == SLOTS
    assert f"kTraceBlocks = {ROWS};" in header and f"kTraceSlots = {ROW_SLOTS};" in header


def _trace_row(sm: int, start_ns: int, epilogue_cycles: int) -> list[int]:
    """A stand-in block row at 2 clock cycles a ns: table 1 µs, wait 0.5, fill 2, first wgmma 0.2 after the fill,
    loop halves 8 and 7 µs over 30 reduction blocks, then the epilogue."""
    row = [0] * 16
    clock = 5000
    row[4] = clock
    for slot, cycles in ((5, 2000), (6, 1000), (7, 4000), (9, 16000), (10, 14000), (11, epilogue_cycles)):
        clock += cycles
        row[slot] = clock
    row[8] = row[7] + 400
    row[0], row[1], row[2], row[3] = start_ns, start_ns + (clock - 5000) // 2, sm, 30
    return row


def test_deform_conv_trace_summary_takes_the_blocks_apart(bench_path: Path) -> None:
    from deform_conv_trace import report, summarize

    rows = [_trace_row(0, 1000, 3000), _trace_row(0, 21500, 3000), _trace_row(1, 1000, 5000)] + [[0] * 16] * 5
    s = summarize(rows)
    assert s["blocks"] == 3 and s["sms"] == 2 and s["blocks_per_sm"] == [1, 2] and s["reduction_blocks"] == (30, 30)
    assert s["ghz"] == 2.0 and s["span_us"] == 40.5
    expected = {"first corner table": 1.0, "wait for the kernels before": 0.5, "pipeline fill (blocks 0, 1 read)": 2.0,
                "first wgmma issued": 0.2, "loop, first half": 8.0, "loop, second half": 7.0}
    for phase, us in expected.items():
        assert s["phases"][phase] == (us, us, us, us), phase
    assert s["phases"]["output stored"] == (1.5, 1.5, 2.5, 2.5)
    assert s["phases"]["whole block"] == (20.0, 20.0, 21.0, 21.0)
    assert s["per_block_us"] == (0.5, 0.5, 0.5)
    assert s["sm_gap_us"] == (0.5, 0.5)
    assert s["sm_end_us"] == (21.0, 30.75, 40.5)
    assert report("resnet_stage", s) == """\
## resnet_stage: 3 blocks on 2 multiprocessors (1/2 a multiprocessor), 30-30 reduction blocks a block, span 40.5 µs, \
clock 2.000 GHz

| phase | median µs | p10 | p90 | max |
|---|---|---|---|---|
| first corner table | 1.00 | 1.00 | 1.00 | 1.00 |
| wait for the kernels before | 0.50 | 0.50 | 0.50 | 0.50 |
| pipeline fill (blocks 0, 1 read) | 2.00 | 2.00 | 2.00 | 2.00 |
| first wgmma issued | 0.20 | 0.20 | 0.20 | 0.20 |
| loop, first half | 8.00 | 8.00 | 8.00 | 8.00 |
| loop, second half | 7.00 | 7.00 | 7.00 | 7.00 |
| output stored | 1.50 | 1.50 | 2.50 | 2.50 |
| whole block | 20.00 | 20.00 | 21.00 | 21.00 |

loop µs per reduction block: median 0.500, p10 0.500, p90 0.500
gap between consecutive blocks on a multiprocessor µs: median 0.50, max 0.50
multiprocessors' last block ends µs after the first start: min 21.0, median 30.8, max 40.5
"""
    assert summarize([_trace_row(3, 1000, 3000)])["sm_gap_us"] is None
    with pytest.raises(ValueError, match="^no rows written: no fused-kernel block ran$"):
        summarize([[0] * 16] * 3)
    # a block whose globaltimer did not advance (a coarse timer) is left out of the clock rate, not divided by
    still = _trace_row(2, 1000, 3000)
    still[1] = still[0]
    assert summarize(rows + [still])["ghz"] == 2.0
    with pytest.raises(ValueError, match="^no block's globaltimer advanced: its clock rate is unknown$"):
        summarize([still])


def test_deform_conv_trace_cases_name_bench_cases_or_exact_waves(bench_path: Path) -> None:
    from deform_conv_trace import case_shape

    assert case_shape("resnet_stage") == (8, 256, 256, 64, 64)
    assert case_shape("waves:2x128") == (8, 128, 256, 64, 66)
    with pytest.raises(SystemExit, match="unknown case 'nope': one of resnet_stage, det_head"):
        case_shape("nope")
