"""``torchtrt-ext inspect``: an ONNX file -> the doctor report; an engine file -> its metadata."""
from __future__ import annotations

import argparse
from typing import Any

from torchtrt_ext.backend.adapter import BACKENDS
from torchtrt_ext.backend.engine import Engine, is_engine_file
from torchtrt_ext.cli._args import add_common, add_plugin_libraries, existing
from torchtrt_ext.cli._errors import CliError
from torchtrt_ext.doctor import report as doctor
from torchtrt_ext.errors import ExitCode, InvalidInputError
from torchtrt_ext.passes.onnx_util import read_onnx
from torchtrt_ext.runtime import check_plugin_libraries


def engine_table(meta: Any) -> str:
    """What ``inspect`` prints for an engine: its target, precision, plugins, inputs, outputs and profiles."""
    from torchtrt_ext.validate import format_table

    lines = [f"engine for {meta.describe_target()}",
             f"precision {meta.options.precision}, plugins {meta.plugin_mode} {list(meta.plugins) or ''}".rstrip(),
             f"built by torchtrt_ext {meta.torchtrt_ext_version or '?'}"]
    lines += [f"plugin {op.plugin.id} ({op.plugin.provider}): {op.route}" for op in meta.plugin_plan.ops]
    lines += [f"plugin {op.id}: your library {op.library}" for op in meta.plugin_plan.user_ops]
    lines += [f"built with your plugin library {lib.describe()}: loading the engine needs --plugin-library PATH to it"
              for lib in meta.options.plugin_libraries]
    if meta.plugins_embedded:
        lines.append("carries host code (embedded plugin library): running it needs --allow-engine-host-code")
    rows = [["input", t.name, t.dtype, "x".join(str(d) for d in t.shape)] for t in meta.inputs]
    rows += [["output", t.name, t.dtype, "x".join(str(d) for d in t.shape)] for t in meta.outputs]
    lines.append(format_table(["io", "name", "dtype", "shape (-1: dynamic)"], rows))
    for index, profile in enumerate(meta.profiles):
        for name, shape_range in profile.items():
            lines.append(f"profile {index}: {name}: {shape_range.describe()}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> tuple[int, Any, str]:
    """The doctor report of an ONNX file or the metadata of an engine file: (exit code, JSON data, text). The exit
    code of a report is ``ExitCode.FAILED`` when the doctor finds a problem that would fail the build."""
    path = existing(args.path, "file")
    if is_engine_file(path):
        meta = Engine.load(path).metadata
        if args.plugin_libraries:  # the same check as loading it: each named library has the recorded SHA-256
            check_plugin_libraries(meta, args.plugin_libraries)
        return ExitCode.OK, {"kind": "engine", **meta.to_json()}, engine_table(meta)
    try:
        model = read_onnx(path)
    except InvalidInputError:
        raise CliError(f"{path} is neither an ONNX model nor a torchtrt_ext engine (empty, truncated or another "
                       "format). Remedy: pass an .onnx file or an engine written by 'torchtrt-ext build'") from None
    result = doctor(model, backend=args.backend, plugin_libraries=args.plugin_libraries)
    code = ExitCode.OK if result.builds else ExitCode.FAILED  # the build would fail: say so to scripts too
    return code, {"kind": "onnx", **result.to_dict()}, result.to_table()


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], **kw: Any) -> None:
    """Add the ``inspect`` subcommand to the subparsers ``sub`` (``kw``: what every subcommand shares)."""
    p = sub.add_parser("inspect", help="ONNX -> the doctor report; engine -> its metadata",
                       description="Report what TensorRT will make of an ONNX graph, or show an engine's metadata.",
                       **kw)
    p.add_argument("path", help="an .onnx file or an engine file")
    p.add_argument("--backend", choices=BACKENDS, default="tensorrt", help="backend the report is for")
    add_plugin_libraries(p)
    add_common(p)
    p.set_defaults(handler=run)
