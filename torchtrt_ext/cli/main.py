"""The parser and the entry point: run one subcommand, print its result or its one-line error, return the exit
code."""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import logging
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from torchtrt_ext._version import __version__
from torchtrt_ext.cli import bench, build, export, inspect, validate
from torchtrt_ext.cli._errors import error_line, exit_code, one_line
from torchtrt_ext.errors import ExitCode

PROG = "torchtrt-ext"

EPILOG = """exit codes: 0 ok; 1 validation failed, a benchmark candidate failed, or inspect found a problem that would
fail the build; 2 usage or bad input (bad arguments, missing file, bad shape string, unknown precision, an engine with
host code and no --allow-engine-host-code);
3 missing dependency or runtime (TensorRT, onnxruntime, a GPU, an engine built for another GPU/TensorRT); 4 export or
build failed; 5 internal error (rerun with --verbose).
Errors are printed as one line ending with the remedy."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) ending with the remedy."""

    def error(self, message: str) -> NoReturn:
        remedy = "see '" + self.prog + " --help'"
        sys.stderr.write(f"{self.prog}: error: {one_line(message, remedy)}\n")
        raise SystemExit(ExitCode.USAGE)


def build_parser() -> argparse.ArgumentParser:
    """The ``torchtrt-ext`` parser: one subparser per subcommand module, each setting its ``run`` as the handler."""
    parser = _Parser(prog=PROG, description="Export, build, inspect, validate and benchmark torchtrt_ext models.",
                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    kw: dict[str, Any] = {"epilog": EPILOG, "formatter_class": argparse.RawDescriptionHelpFormatter}
    for command in (export, build, inspect, validate, bench):
        command.add_parser(sub, **kw)
    return parser


@contextlib.contextmanager
def _logging_to_stderr(verbose: bool) -> Iterator[None]:
    """Meanwhile, the package's log lines go to this stderr, one per line; the logger is put back as it was after
    (``main`` called in-process, from a script or a test, must not leave a handler on a stream that may close)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: %(levelname)s: %(message)s"))
    root = logging.getLogger("torchtrt_ext")
    saved = root.handlers[:], root.level, root.propagate
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    root.propagate = False
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        root.propagate = saved[2]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error already printed on one line (2)
        return int(exc.code or 0)
    with _logging_to_stderr(args.verbose), _stdout_to_stderr() if args.json else contextlib.nullcontext():
        try:
            code, data, text = args.handler(args)
        except KeyboardInterrupt:
            print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
            return 130
        except Exception as exc:  # noqa: BLE001 - the boundary: every error becomes one line and an exit code
            code = exit_code(exc)
            line = error_line(exc)
            if args.verbose:
                traceback.print_exc()
            print(f"{PROG} {args.command}: error: {line}", file=sys.stderr)
            data, text = {"ok": False, "exit_code": code, "error": line}, None
    if args.json:
        _print(json.dumps(data, indent=2, default=str, allow_nan=False))
    elif text is not None:
        _print(text)
    return int(code)


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Send whatever is written to stdout meanwhile, by Python or by native code (TensorRT prints some warnings
    itself), to stderr, so that with --json stdout holds the JSON document only."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        ctypes.CDLL(None).fflush(None)  # C stdio buffers still holding native output go to stderr too
        os.dup2(saved, 1)
        os.close(saved)


def _print(text: str) -> None:
    """Print to stdout; a reader that stopped reading (``inspect ... | head``) is not an error."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the flush at exit does not fail again
