"""``torchtrt-ext bench``: models, ONNX files and engines timed side by side."""
from __future__ import annotations

import argparse
from typing import Any

from torchtrt_ext.cli._args import add_common, add_engine_host_code, add_inputs, dtype_of, parse_ranges, shapes_arg
from torchtrt_ext.cli._errors import CliError
from torchtrt_ext.cli._targets import (
    check_engine_host_code,
    declared_inputs,
    device_for,
    examples_for,
    open_target,
    target_kind,
)
from torchtrt_ext.errors import ExitCode


def run(args: argparse.Namespace) -> tuple[int, Any, str]:
    """Time every target on the same inputs: (exit code, JSON data, text)."""
    import torch

    from torchtrt_ext.bench import benchmark

    kinds = [target_kind(t) for t in args.targets]
    check_engine_host_code(args.targets, kinds, args.allow_engine_host_code)
    device = device_for(args.device, kinds)
    dtype = dtype_of(args.dtype)
    candidates: dict[str, Any] = {}
    for text, kind in zip(args.targets, kinds):
        _, runnable = open_target(text, device, dtype, args.allow_engine_host_code, isolated=False)  # timed in-process
        candidates[f"{text} (onnxruntime)" if kind == "onnx" else text] = runnable
        if kind == "model" and args.torch_compile:
            candidates[f"{text} (torch.compile)"] = torch.compile(runnable)
    shapes, ranges = shapes_arg(args.input_shape), parse_ranges(args.input_range)
    declared = declared_inputs(*candidates.values())
    if not shapes:  # the shapes and types an ONNX model or engine declares
        if not declared:
            raise CliError("bench cannot tell the input shapes. Remedy: add --input-shape x:1x3x224x224")
        shapes = {name: shape for name, shape, _ in declared}
    # --input-shape names follow the first model spec's forward; declared shapes are in the graph's own order
    first_model = next((c for c, k in zip(candidates.values(), kinds) if k == "model"), None) if args.input_shape \
        else None
    examples = examples_for(shapes, first_model, dtype, device, ranges, declared,
                            declared_floats=not args.input_shape)
    report = benchmark(candidates, examples, warmup=args.warmup, iters=args.iters, device=device,
                       progress=not args.quiet)
    return (ExitCode.FAILED if report.failed else ExitCode.OK), report.to_json(), report.to_table()


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], **kw: Any) -> None:
    """Add the ``bench`` subcommand to the subparsers ``sub`` (``kw``: what every subcommand shares)."""
    p = sub.add_parser("bench", help="time models, ONNX files and engines side by side",
                       description="Benchmark every TARGET on the same inputs: CUDA events on a GPU, a labelled "
                                   "host timer on the CPU.", **kw)
    p.add_argument("targets", nargs="+", help="model specs, .onnx files (onnxruntime) and engine files")
    add_inputs(p)
    p.add_argument("--torch-compile", action="store_true", help="add a torch.compile row for each model spec")
    p.add_argument("--warmup", type=int, default=50, help="untimed runs per target (default 50)")
    p.add_argument("--iters", type=int, default=200, help="timed runs per target (default 200)")
    p.add_argument("--device", default="auto", help="cpu or cuda (default: cuda when torch sees a GPU)")
    add_engine_host_code(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    add_common(p)
    p.set_defaults(handler=run)
