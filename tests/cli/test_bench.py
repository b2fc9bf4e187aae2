"""``torchtrt-ext bench``: a candidate that fails is reported and the command exits 1, so a CI loop over bench runs
does not pass on a broken candidate."""
from __future__ import annotations

import json

import pytest

from torchtrt_ext import cli
from torchtrt_ext.errors import ExitCode

ARGS = ["--input-shape", "x:1x3x8x8", "--warmup", "1", "--iters", "2", "--device", "cpu", "-q"]


def test_a_failed_candidate_exits_1_and_the_others_still_run(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bench", "tests.cli.models:make_head", "tests.cli.models:make_failing", *ARGS, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == ExitCode.FAILED
    rows = {row["name"]: row for row in report["rows"]}
    assert "this candidate always fails" in rows["tests.cli.models:make_failing"]["error"]
    assert not rows["tests.cli.models:make_head"]["error"] and rows["tests.cli.models:make_head"]["p50_ms"] > 0


def test_candidates_that_all_run_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "tests.cli.models:make_head", "tests.cli.models:make_other", *ARGS]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "make_other" in out and "FAILED" not in out
