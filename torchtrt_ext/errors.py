"""The project's exception family. Every error says what failed, what was expected and the remedy, and carries them
as fields (``what``, ``expected``, ``remedy``) so that no caller parses the message text back, and its class names the
exit code the ``torchtrt-ext`` command returns for it (``exit_code``)."""
from __future__ import annotations

import enum
from typing import ClassVar


class ExitCode(enum.IntEnum):
    """The exit codes of the ``torchtrt-ext`` command."""

    OK = 0
    FAILED = 1  # validation failed (an output out of tolerance), a benchmark candidate failed, or inspect's doctor
    # found a problem that would fail the build
    USAGE = 2  # bad arguments or input: a missing or unreadable file, a bad shape, an unknown precision, ...
    MISSING = 3  # a missing dependency or runtime: TensorRT, onnxruntime, a GPU, an engine built for another one
    BUILD = 4  # export or engine build failed
    INTERNAL = 5  # an unexpected error (a bug): the traceback is printed with --verbose


class Failure(str):
    """A message 'what failed. Expected: ... Remedy: ...' that keeps its three parts (see :func:`failure`); an empty
    part is left out of the text."""

    what: str
    expected: str
    remedy: str

    def __new__(cls, what: str, expected: str, remedy: str) -> Failure:
        text = super().__new__(cls, what + (f". Expected: {expected}" if expected else "")
                               + (f". Remedy: {remedy}" if remedy else ""))
        text.what, text.expected, text.remedy = what, expected, remedy
        return text


class TorchTRTExtError(Exception):
    """Base class of every error torchtrt_ext raises on purpose.

    Raise it with a :func:`failure` message, or with ``what`` plus the keywords ``expected`` and ``remedy``; the parts
    are the fields ``what``, ``expected`` and ``remedy`` (empty when the message gave none).
    """

    exit_code: ClassVar[ExitCode] = ExitCode.BUILD  # the pipeline failed, unless a subclass says what else

    def __init__(self, message: str = "", *, expected: str = "", remedy: str = "") -> None:
        if isinstance(message, Failure):
            what, expected, remedy = message.what, message.expected, message.remedy
        else:
            what = message
            message = failure(what, expected, remedy) if expected or remedy else what
        super().__init__(message)
        self.what, self.expected, self.remedy = what, expected, remedy


class InvalidAttributeError(TorchTRTExtError, ValueError):
    """An op attribute is unknown, of the wrong type, or out of its allowed range."""

    exit_code = ExitCode.USAGE


class InvalidInputError(TorchTRTExtError, ValueError):
    """A tensor or example input does not fit what the op, model or engine expects."""

    exit_code = ExitCode.USAGE


class OpDefinitionError(TorchTRTExtError, TypeError):
    """An op definition (OpSpec) is inconsistent."""


class UnknownOpError(TorchTRTExtError, KeyError):
    """No torchtrt_ext op of that ONNX op_type is defined in this process (a KeyError, as a registry lookup)."""

    __str__ = TorchTRTExtError.__str__  # the message as written, not KeyError's quoted repr


class ExportError(TorchTRTExtError, RuntimeError):
    """torch -> ONNX export failed."""


class MissingDependencyError(TorchTRTExtError, ImportError):
    """An optional dependency (tensorrt, tensorrt_rtx, onnxruntime, ...) is not installed."""

    exit_code = ExitCode.MISSING


class LibraryNotFoundError(TorchTRTExtError, FileNotFoundError):
    """A native library (CUDA kernels or TensorRT plugins) was not built or cannot be loaded."""

    exit_code = ExitCode.MISSING


class CudaMismatchError(TorchTRTExtError, ImportError):
    """The native libraries were built for another CUDA major version than the process's (torch's) CUDA runtime."""

    exit_code = ExitCode.MISSING


class KernelError(TorchTRTExtError, RuntimeError):
    """A launcher of libtorchtrt_ext_kernels.so returned a CUDA error status."""


class BuildError(TorchTRTExtError, RuntimeError):
    """Parsing the ONNX graph or building the TensorRT engine failed."""


class OnnxParseError(BuildError):
    """TensorRT's ONNX parser rejected the graph; ``nodes`` holds one ``backend.builder.ParserError`` per failure."""

    def __init__(self, message: str = "", *, expected: str = "", remedy: str = "", nodes: tuple[object, ...] = ()) -> None:
        super().__init__(message, expected=expected, remedy=remedy)
        self.nodes = tuple(nodes)


class EngineCompatibilityError(TorchTRTExtError, RuntimeError):
    """A serialized engine was built for another GPU, TensorRT version or plugin library."""

    exit_code = ExitCode.MISSING


class CorruptEngineError(EngineCompatibilityError):
    """An engine file is truncated, has a bad checksum, or is not an engine file at all."""

    exit_code = ExitCode.USAGE


class HostCodeNotAllowedError(TorchTRTExtError, PermissionError):
    """An engine carries host code (an embedded plugin library) and the caller did not allow it to run."""

    exit_code = ExitCode.USAGE


class NoGPUError(TorchTRTExtError, RuntimeError):
    """A TensorRT engine needs a CUDA GPU and torch sees none."""

    exit_code = ExitCode.MISSING


class FileWriteError(TorchTRTExtError, OSError):
    """Writing one of the user's files failed (full disk, quota, file size limit, permissions); it names the file."""


class RuntimeCrashError(TorchTRTExtError, RuntimeError):
    """A runtime ran in a process of its own (onnxruntime for ``validate``) died instead of answering."""

    exit_code = ExitCode.MISSING  # the runtime, not the model or the arguments, failed


class ValidationFailedError(TorchTRTExtError, AssertionError):
    """Raised by ``ValidationReport.check()`` when an output is out of tolerance."""

    exit_code = ExitCode.FAILED


def failure(what: str, expected: str, remedy: str) -> Failure:
    """The message 'what failed. Expected: ... Remedy: ...', its parts kept for the exception's fields."""
    return Failure(what, expected, remedy)
