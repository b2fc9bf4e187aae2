"""How a failed command reports: one line ending with the remedy, and its exit code."""
from __future__ import annotations

import re

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_MISSING, EXIT_BUILD, EXIT_INTERNAL = 0, 1, 2, 3, 4, 5

#: TensorRT (and ONNX parser) message patterns -> the remedy of DESIGN.md §7. Checked in order, first match wins,
#: so the more specific patterns come first (a missing plugin also says "No importer registered for op").
TRT_MESSAGE_REMEDIES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), r) for p, r in (
    (r"plugin (creator )?not found|could not find (the )?plugin|getPluginCreator|creator .{0,60}not (be )?found"
     r"|fail(ed)? to load (the )?(plugin )?library|plugin library .{0,40}(not found|fail)",
     "load the plugin library (--plugins cpp, after building libtorchtrt_ext_plugins.so) and check the node's "
     "op_type, plugin_version and plugin_namespace; or --plugins decompose"),
    (r"no importer registered for op|unsupported_node|unsupported onnx (node|op)|unsupported operator",
     "map the op to supported ONNX ops at export, decompose it (--plugins decompose), or provide a plugin"),
    (r"could not find any implementation|no implementation (obeys|found|for)",
     "try --precision fp32, or narrow the dynamic shape range (--min-shapes/--max-shapes)"),
    (r"compute capability .{0,40}not supported|deserializ|serialization (assertion|error)|version tag|magic tag"
     r"|built for (another|a different)|incompatible (engine|plan)",
     "check the plugin's serialized fields; rebuild the engine on the target GPU with this TensorRT version "
     "(torchtrt-ext build)"),
    (r"\bnan\b",
     "a plugin was fed FP16 it does not handle: restrict its formats in supportsFormatCombination, or keep that "
     "part in FP32 (--precision fp32)"),
    (r"slow|fall(ing|s)? back to",
     "narrow the profiles (--min-shapes/--max-shapes) and read the builder warnings"),
))


def remedy_for(message: str) -> str | None:
    """The DESIGN.md §7 remedy for a TensorRT error message, or None when no pattern matches."""
    for pattern, remedy in TRT_MESSAGE_REMEDIES:
        if pattern.search(message):
            return remedy
    return None


class CliError(Exception):
    """A failure the command reports as one line with an exit code; its message is one sentence that ends with
    "Remedy: ..."."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def _collapsed(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).strip()


def one_line(what: str, remedy: str) -> str:
    """``what`` collapsed to one line, then ``. Remedy: <remedy>``."""
    return f"{_collapsed(what).rstrip(' .')}. Remedy: {remedy}"


def error_line(exc: BaseException, code: int) -> str:
    """The one line a failed command prints for ``exc``, built from the error's fields (what failed, what was
    expected, the remedy), never from its text: where a build or library error quotes a TensorRT message of DESIGN.md
    §7, that message's remedy replaces the error's own; an error without a remedy gets "rerun with --verbose"."""
    from torchtrt_ext.errors import TorchTRTExtError

    if isinstance(exc, CliError):
        return _collapsed(str(exc))  # written as one sentence ending with its remedy
    message = str(exc) or type(exc).__name__
    if code == EXIT_INTERNAL:
        message = f"{type(exc).__name__}: {message}"
    design = remedy_for(message) if code in (EXIT_BUILD, EXIT_MISSING) else None
    if isinstance(exc, TorchTRTExtError) and exc.remedy:
        what = f"{exc.what}. Expected: {exc.expected}" if exc.expected else exc.what
        return one_line(what, design or exc.remedy)
    return one_line(message, design or "rerun with --verbose for the details")


def exit_code(exc: BaseException) -> int:
    from torchtrt_ext import errors

    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, (errors.CorruptEngineError, errors.HostCodeNotAllowedError)):
        return EXIT_USAGE
    if isinstance(exc, (errors.MissingDependencyError, errors.LibraryNotFoundError, errors.EngineCompatibilityError)):
        return EXIT_MISSING
    if isinstance(exc, (errors.ExportError, errors.BuildError)):
        return EXIT_BUILD
    if isinstance(exc, (errors.InvalidInputError, errors.InvalidAttributeError, FileNotFoundError)):
        return EXIT_USAGE
    if isinstance(exc, errors.TorchTRTExtError):
        return EXIT_BUILD
    return EXIT_INTERNAL

