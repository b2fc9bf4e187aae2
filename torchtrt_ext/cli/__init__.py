"""The ``torchtrt-ext`` command: export, build, inspect, validate and bench from a shell.

    torchtrt-ext export  mypkg.models:make_detector --input-shape x:1x3x640x640 -o det.onnx
    torchtrt-ext inspect det.onnx                      # the doctor report (what TensorRT will make of the graph)
    torchtrt-ext build   det.onnx -o det.engine --precision fp16 --min-shapes x:1x3x640x640 \\
                         --opt-shapes x:8x3x640x640 --max-shapes x:16x3x640x640
    torchtrt-ext inspect det.engine                    # the engine's metadata (target GPU, TensorRT, profiles)
    torchtrt-ext validate mypkg.models:make_detector det.onnx      # PyTorch vs the export on onnxruntime (CPU)
    torchtrt-ext validate mypkg.models:make_detector det.engine    # PyTorch vs the engine (needs a GPU runtime)
    torchtrt-ext bench   mypkg.models:make_detector det.onnx det.engine --torch-compile --input-shape x:8x3x640x640

A model spec is ``package.module:factory`` or ``path/to/file.py:factory``: ``factory`` is an ``nn.Module`` class or a
function returning a module (called with no arguments), or a module instance. The current directory is importable.

Shapes are written ``name:1x3x224x224``, several separated by commas (trtexec's spelling); ``--input-shape`` also
accepts a bare ``1x3x224x224`` for the inputs in order. Every subcommand takes ``--json`` (one JSON document on
stdout) and ``--help``. Errors are one line on stderr ending with the remedy: the error's own ``remedy`` field, set
where it was raised (a failed build maps TensorRT's messages to remedies in ``backend.remedies``).

Exit codes (``errors.ExitCode``; each error class names its own as ``exit_code``):
    0  success
    1  validation failed (an output out of tolerance), a benchmark candidate failed, or inspect's doctor found a
       problem that would fail the build
    2  usage or bad input: bad arguments, a missing or unreadable file, a bad shape string, an unknown precision, an
       engine that carries host code run without --allow-engine-host-code
    3  a missing dependency or runtime: TensorRT / onnxruntime not installed, no GPU to run an engine, an engine
       built for another GPU or TensorRT version
    4  export or engine build failed (the message says why, TensorRT's errors included)
    5  an unexpected internal error (rerun with --verbose for the traceback)
"""
from __future__ import annotations
from torchtrt_ext.cli._args import parse_named_shapes, parse_shape
from torchtrt_ext.cli._errors import CliError, error_line, exit_code
from torchtrt_ext.cli.main import build_parser, main

__all__ = ["CliError", "build_parser", "error_line", "exit_code", "main", "parse_named_shapes", "parse_shape"]
