"""``torchtrt-ext validate``: a candidate against a reference on the same random inputs."""
from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from torchtrt_ext.cli._args import (
    add_common,
    add_engine_host_code,
    add_inputs,
    add_plugin_libraries,
    dtype_of,
    parse_ranges,
    shapes_arg,
)
from torchtrt_ext.cli._errors import CliError
from torchtrt_ext.cli._targets import (
    check_engine_host_code,
    check_engine_libraries,
    declared_inputs,
    device_for,
    examples_for,
    open_target,
    target_kind,
)
from torchtrt_ext.errors import ExitCode
from torchtrt_ext.validate import PRECISIONS as TOLERANCE_PRECISIONS


def run(args: argparse.Namespace) -> tuple[int, Any, str]:
    """Compare the candidate with the reference on random inputs: (exit code, JSON data, text)."""
    from torchtrt_ext.validate import validate

    if args.precision is not None and args.precision not in TOLERANCE_PRECISIONS:
        raise CliError(f"unknown precision {args.precision!r}. Remedy: use fp32, fp16 or bf16")
    shapes, ranges = shapes_arg(args.input_shape), parse_ranges(args.input_range)
    kinds = [target_kind(args.reference), target_kind(args.candidate)]
    check_engine_host_code([args.reference, args.candidate], kinds, args.allow_engine_host_code)
    check_engine_libraries([args.reference, args.candidate], kinds, args.plugin_libraries)
    device = device_for(args.device, kinds)
    dtype = dtype_of(args.dtype)
    _, reference = open_target(args.reference, device, dtype, args.allow_engine_host_code, args.plugin_libraries)
    _, candidate = open_target(args.candidate, device, dtype, args.allow_engine_host_code, args.plugin_libraries)
    examples = examples_for(shapes, reference, dtype, device, ranges, declared_inputs(reference, candidate))
    report = validate(reference, candidate, examples, trials=args.trials, atol=args.atol, rtol=args.rtol,
                      precision=args.precision, seed=args.seed)
    report = dataclasses.replace(report, reference=args.reference, candidate=args.candidate)
    return (ExitCode.OK if report.passed else ExitCode.FAILED), report.to_json(), report.to_table()


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], **kw: Any) -> None:
    """Add the ``validate`` subcommand to the subparsers ``sub`` (``kw``: what every subcommand shares)."""
    p = sub.add_parser("validate", help="compare a candidate with a reference on random inputs",
                       description="Run REFERENCE and CANDIDATE on the same random inputs and compare every output. "
                                   "ONNX files run on onnxruntime (CPU); engines need a GPU and a TensorRT runtime.",
                       **kw)
    p.add_argument("reference", help="model spec (module:factory) or .onnx file")
    p.add_argument("candidate", help=".onnx file (onnxruntime) or engine file")
    add_inputs(p)
    p.add_argument("--trials", type=int, default=3, help="input sets (default 3)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default by precision)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default by precision)")
    p.add_argument("--precision", help="fp32, fp16 or bf16: picks the default tolerances (default: inferred)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--device", default="auto", help="cpu or cuda (default: cuda for engines, else cpu if no GPU)")
    add_engine_host_code(p)
    add_plugin_libraries(p)
    add_common(p)
    p.set_defaults(handler=run)
