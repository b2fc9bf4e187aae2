"""The project's exception family. Every message says what failed, what was expected and the remedy."""
from __future__ import annotations


class TorchTRTExtError(Exception):
    """Base class of every error torchtrt_ext raises on purpose."""


class InvalidAttributeError(TorchTRTExtError, ValueError):
    """An op attribute is unknown, of the wrong type, or out of its allowed range."""


class InvalidInputError(TorchTRTExtError, ValueError):
    """A tensor or example input does not fit what the op, model or engine expects."""


class OpDefinitionError(TorchTRTExtError, TypeError):
    """An op definition (OpSpec) is inconsistent."""


class ExportError(TorchTRTExtError, RuntimeError):
    """torch -> ONNX export failed."""


class MissingDependencyError(TorchTRTExtError, ImportError):
    """An optional dependency (tensorrt, tensorrt_rtx, onnxruntime, ...) is not installed."""


class LibraryNotFoundError(TorchTRTExtError, FileNotFoundError):
    """A native library (CUDA kernels or TensorRT plugins) was not built or cannot be loaded."""


class KernelError(TorchTRTExtError, RuntimeError):
    """A launcher of libtorchtrt_ext_kernels.so returned a CUDA error status."""


class BuildError(TorchTRTExtError, RuntimeError):
    """Parsing the ONNX graph or building the TensorRT engine failed."""


class EngineCompatibilityError(TorchTRTExtError, RuntimeError):
    """A serialized engine was built for another GPU, TensorRT version or plugin library."""


class CorruptEngineError(EngineCompatibilityError):
    """An engine file is truncated, has a bad checksum, or is not an engine file at all."""


class HostCodeNotAllowedError(TorchTRTExtError, PermissionError):
    """An engine carries host code (an embedded plugin library) and the caller did not allow it to run."""


class NoGPUError(TorchTRTExtError, RuntimeError):
    """A TensorRT engine needs a CUDA GPU and torch sees none."""


class ValidationFailedError(TorchTRTExtError, AssertionError):
    """Raised by ``ValidationReport.check()`` when an output is out of tolerance."""


def failure(what: str, expected: str, remedy: str) -> str:
    """Format an error message as 'what failed. Expected: ... Remedy: ...'."""
    return f"{what}. Expected: {expected}. Remedy: {remedy}"
