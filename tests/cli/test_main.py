"""The command's boundary: an error's class names the exit code, its fields make the one line printed."""
from __future__ import annotations

import argparse
import json
from typing import NoReturn

import pytest

from torchtrt_ext import cli, errors
from torchtrt_ext.cli import inspect
from torchtrt_ext.errors import ExitCode

EXPECTED_CODES = {
    errors.InvalidAttributeError: ExitCode.USAGE, errors.InvalidInputError: ExitCode.USAGE,
    errors.CorruptEngineError: ExitCode.USAGE, errors.HostCodeNotAllowedError: ExitCode.USAGE,
    cli.CliError: ExitCode.USAGE,
    errors.MissingDependencyError: ExitCode.MISSING, errors.LibraryNotFoundError: ExitCode.MISSING,
    errors.CudaMismatchError: ExitCode.MISSING, errors.EngineCompatibilityError: ExitCode.MISSING,
    errors.NoGPUError: ExitCode.MISSING,
    errors.ExportError: ExitCode.BUILD, errors.BuildError: ExitCode.BUILD, errors.OnnxParseError: ExitCode.BUILD,
    errors.KernelError: ExitCode.BUILD, errors.OpDefinitionError: ExitCode.BUILD,
    errors.ValidationFailedError: ExitCode.FAILED,
}


@pytest.mark.parametrize(("error_class", "expected"), EXPECTED_CODES.items(), ids=lambda v: getattr(v, "__name__", ""))
def test_the_exit_code_is_the_error_classs(error_class: type[errors.TorchTRTExtError], expected: ExitCode,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    def failing(args: argparse.Namespace) -> NoReturn:
        raise error_class("it failed", expected="it working", remedy="fix it")

    monkeypatch.setattr(inspect, "run", failing)  # build_parser binds the handler when main() calls it
    assert error_class.exit_code == expected
    assert cli.main(["inspect", "any.onnx", "--json"]) == expected
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"ok": False, "exit_code": int(expected),
                                        "error": "it failed. Expected: it working. Remedy: fix it"}


def test_no_gpu_is_a_missing_runtime_not_a_failed_build(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def failing(args: argparse.Namespace) -> NoReturn:
        raise errors.NoGPUError(errors.failure("running the engine needs a CUDA GPU", "a GPU", "run it on one"))

    monkeypatch.setattr(inspect, "run", failing)
    assert cli.main(["inspect", "any.onnx"]) == ExitCode.MISSING != ExitCode.BUILD
    assert capsys.readouterr().err.strip() == ("torchtrt-ext inspect: error: running the engine needs a CUDA GPU. "
                                               "Expected: a GPU. Remedy: run it on one")


@pytest.mark.parametrize(("error", "expected"), [(FileNotFoundError("gone"), ExitCode.USAGE),
                                                 (ValueError("odd"), ExitCode.INTERNAL)])
def test_errors_from_outside_the_family(error: Exception, expected: ExitCode) -> None:
    assert cli.exit_code(error) == expected


def test_main_in_process_leaves_the_package_logger_as_it_found_it(tmp_path: object,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A script or test calling ``cli.main`` keeps its own logging: main's stderr handler (on a stream that may be
    closed later, as pytest's capture is) is taken off again, with the level and propagation it changed."""
    import logging

    logger = logging.getLogger("torchtrt_ext")
    before = (logger.handlers[:], logger.level, logger.propagate)
    assert cli.main(["inspect", "does-not-exist.onnx"]) == ExitCode.USAGE
    assert "does-not-exist.onnx" in capsys.readouterr().err
    assert (logger.handlers[:], logger.level, logger.propagate) == before


@pytest.mark.parametrize(("error", "line"), [
    (ValueError("odd value"), "ValueError: odd value. Remedy: rerun with --verbose for the details"),  # a bug: named
    (FileNotFoundError("gone.onnx"), "gone.onnx. Remedy: rerun with --verbose for the details"),  # bad input
    (FileNotFoundError(), "FileNotFoundError. Remedy: rerun with --verbose for the details"),  # no message: its class
    (errors.BuildError("the build failed"), "the build failed. Remedy: rerun with --verbose for the details"),
    (errors.BuildError("the build failed.", remedy="fix the model."), "the build failed. Remedy: fix the model."),
    (errors.BuildError("the build\n    failed", expected="a graph", remedy="fix it"),
     "the build failed. Expected: a graph. Remedy: fix it"),
], ids=["internal", "missing file", "no message", "no remedy", "no expected", "several lines"])
def test_the_one_line_of_an_error(error: Exception, line: str) -> None:
    """An error without a remedy (one from outside the family, or of ours raised without one) gets "rerun with
    --verbose"; a bug names its class; the line is one line, its sentence ending in one full stop."""
    assert cli.error_line(error) == line


def test_a_usage_error_names_the_subcommands_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["build", "model.onnx"]) == ExitCode.USAGE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("torchtrt-ext build: error: ") and "-o/--output" in line
    assert line.endswith(". Remedy: see 'torchtrt-ext build --help'")
    assert cli.main(["inspect", "model.onnx", "--no-such-flag"]) == ExitCode.USAGE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--no-such-flag" in line and line.endswith(". Remedy: see 'torchtrt-ext --help'")
