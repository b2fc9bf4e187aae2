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
