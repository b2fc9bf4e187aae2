"""The L2Norm launch plan on the CPU: l2norm_plan_check.cu (host code only, no GPU) is built with nvcc and run.

It asserts our own planning logic, not that any kernel runs: every plan chosen for ~55,000 views, dtypes, alignments
and three device profiles is one the launcher accepts, and the benchmark cases get the kernels their measurements on the
H200 chose (see the header of csrc/kernels/l2norm.cu). Skipped, with the reason, where there is no CUDA compiler.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kernels._host_check import host_check_report

SOURCE = Path(__file__).resolve().parent / "l2norm_plan_check.cu"
ROWS, COLS_CACHED, COLS_TWO_PASS, COLS_SMEM, COLS_PIPE, ROWS_EXACT, COLS_SMALL = range(7)  # l2norm_detail::Kind
_CASE = re.compile(r"^case (\w+) (\w+) (\w+) kind=(\d+) tx=(\d+) ty=(\d+) per_thread=(\d+) grid=(\d+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def plan_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    return host_check_report(tmp_path_factory, SOURCE, failure="plans the launcher rejects")


def _cases(report: str) -> dict[tuple[str, str, str], dict[str, int]]:
    keys = ("kind", "tx", "ty", "per_thread", "grid")
    return {m.group(1, 2, 3): dict(zip(keys, map(int, m.group(4, 5, 6, 7, 8)))) for m in _CASE.finditer(report)}


def test_every_plan_is_one_the_launcher_accepts(plan_report: str) -> None:
    summary = plan_report.strip().splitlines()[-1]
    match = re.fullmatch(r"checked (\d+) plans, (\d+) rejected", summary)
    assert match, f"no summary line: {summary!r}"
    checked, rejected = map(int, match.groups())
    assert checked > 50_000 and rejected == 0, summary


def test_benchmark_cases_get_the_measured_kernels(plan_report: str) -> None:
    cases = _cases(plan_report)
    for dtype in ("fp32", "fp16"):
        assert cases[("det_head_nchw", dtype, "h200")]["kind"] == COLS_SMEM
        small = cases[("small_nchw", dtype, "h200")]
        assert small["kind"] == COLS_SMALL and (small["tx"], small["ty"], small["per_thread"]) == (8, 32, 2)
        assert small["grid"] == 6400 // (8 * (4 if dtype == "fp32" else 8)), "a block per tile, no loop"
        wide = cases[("wide_nchw", dtype, "h200")]
        assert wide["kind"] == COLS_PIPE and wide["grid"] == 2 * 132, "the pipelined kernel runs two blocks per SM"
        tokens = cases[("tokens_last", dtype, "h200")]
        assert tokens["kind"] == ROWS_EXACT and tokens["tx"] == 64 and tokens["ty"] == 1, "64 lanes per row, a row per block"
        assert tokens["grid"] == 8 * 4096, "the exact-fit kernel has no loop: a block per row"


def test_plan_follows_the_device(plan_report: str) -> None:
    cases = _cases(plan_report)
    # a T4 has 64 KB of shared memory per block: the 64 KB tile of the pipelined kernel plus its scratch does not fit
    assert cases[("wide_nchw", "fp32", "t4")]["kind"] != COLS_PIPE
    assert cases[("wide_nchw", "fp32", "a100")]["grid"] == 2 * 108
    # the small-tensor plan depends on the SM count: 200 tiles are one wave on 132 SMs, not on 40
    assert cases[("small_nchw", "fp32", "h200")]["kind"] == COLS_SMALL
    assert cases[("small_nchw", "fp32", "t4")]["kind"] == COLS_SMEM
