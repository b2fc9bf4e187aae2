"""How a failed command reports: one line ending with the remedy, and the exit code its error class names. The remedy
is the error's own field, set where it was raised (TensorRT's messages are read in ``backend.remedies``)."""
from __future__ import annotations

import re

from torchtrt_ext.errors import ExitCode, TorchTRTExtError


class CliError(TorchTRTExtError):
    """Bad arguments or input, found by the command itself; its message is one sentence that ends with
    "Remedy: ..."."""

    exit_code = ExitCode.USAGE


def _collapsed(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip()


def one_line(what: str, remedy: str) -> str:
    """``what`` collapsed to one line, then ``. Remedy: <remedy>``."""
    return f"{_collapsed(what).rstrip(' .')}. Remedy: {remedy}"


def exit_code(exc: BaseException) -> ExitCode:
    """The exit code for ``exc``: its class's ``exit_code``; a missing file is bad input; anything else a bug."""
    if isinstance(exc, TorchTRTExtError):
        return exc.exit_code
    return ExitCode.USAGE if isinstance(exc, FileNotFoundError) else ExitCode.INTERNAL


def error_line(exc: BaseException) -> str:
    """The one line a failed command prints for ``exc``, built from the error's fields (what failed, what was
    expected, the remedy), never from its text; an error without a remedy gets "rerun with --verbose"."""
    if isinstance(exc, CliError):
        return _collapsed(str(exc))  # written as one sentence ending with its remedy
    if isinstance(exc, TorchTRTExtError) and exc.remedy:
        what = f"{exc.what}. Expected: {exc.expected}" if exc.expected else exc.what
        return one_line(what, exc.remedy)
    message = str(exc) or type(exc).__name__
    if exit_code(exc) == ExitCode.INTERNAL:
        message = f"{type(exc).__name__}: {message}"
    return one_line(message, "rerun with --verbose for the details")
