"""The fused DeformConv2d kernel's plan on the CPU: deform_conv2d_plan_check.cu (host code only, no GPU) is built with
nvcc and run.

It asserts our own planning logic, not that any kernel runs: the reduction-block order the kernel walks from any
block equals the one computed per block, whose inverse places the reordered weight's tiles, for kernels of 1 to 50
taps and 1 to 6 channel blocks; the float32 split sampler's taps per block; the cut of a mostly idle
last wave's tiles into pieces (fusedSplit) for 1 to 1200 tiles on 7 multiprocessor counts; and the cuts of the
benchmark cases on an H200 (csrc/kernels/deform_conv2d_sm90.cuh). Skipped, with the reason, where there is no CUDA
compiler. The kernels that follow the plan are tested on the GPU (test_deform_conv2d_full_launcher.py).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.kernels._host_check import host_check_report

SOURCE = Path(__file__).resolve().parent / "deform_conv2d_plan_check.cu"
_CASE = re.compile(r"^case (\w+) tiles=(\d+) whole=(\d+) pieces=(\d+) blocks=(\d+)$", re.MULTILINE)


@pytest.fixture(scope="module")
def plan_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    return host_check_report(tmp_path_factory, SOURCE, "cublaslt.cu", "cuda_runtime_info.cu", libs=("-ldl",),
                             failure="failed checks")


def test_every_order_and_cut_holds(plan_report: str) -> None:
    summary = plan_report.strip().splitlines()[-1]
    match = re.fullmatch(r"checked (\d+) orders and splits, (\d+) failed", summary)
    assert match, f"no summary line: {summary!r}"
    checked, failed = map(int, match.groups())
    assert checked > 2_000_000 and failed == 0, summary


def test_benchmark_cases_get_their_cuts(plan_report: str) -> None:
    cases = {m.group(1): tuple(map(int, m.group(2, 3, 4, 5))) for m in _CASE.finditer(plan_report)}
    # (tiles, whole, pieces, blocks): 400 tiles took 4 waves of 132, the last holding 4; now 3 waves and 4 x 16 pieces
    assert cases["8x256x80x80"] == (400, 396, 16, 460)
    assert cases["8x256x80x80_no_room"] == (400, 400, 1, 400), "no room for the partial sums: nothing is cut"
    assert cases["8x256x64x64"] == (256, 256, 1, 256), "a last wave of 124 of 132 tiles stays whole"
    assert cases["4x128x100x76"] == (238, 238, 1, 238)
    assert cases["1x64x40x40"] == (13, 0, 4, 52), "9 reduction blocks: pieces of at least 2"


def test_the_float32_split_sampler_splits_the_taps_of_small_problems_only(plan_report: str) -> None:
    # 1x64x40x40: 50 blocks of all 9 taps -> 450 blocks of one; 8x256x64x64: 4096 blocks keep every tap
    assert "split_sampler small group_taps=1 large group_taps=9" in plan_report
