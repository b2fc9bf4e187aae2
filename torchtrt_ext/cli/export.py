"""``torchtrt-ext export``: a PyTorch model -> ONNX, custom ops as torchtrt_ext nodes."""
from __future__ import annotations

import argparse
import time
from typing import Any

from torchtrt_ext._files import save_onnx
from torchtrt_ext._progress import ticking
from torchtrt_ext.cli._args import add_common, add_inputs, dtype_of, output_path, parse_ranges, shapes_arg
from torchtrt_ext.cli._errors import CliError
from torchtrt_ext.cli._targets import custom_nodes, examples_for, load_model, spec_file
from torchtrt_ext.passes import pipeline
from torchtrt_ext.errors import ExitCode


def run(args: argparse.Namespace) -> tuple[int, Any, str]:
    """Export the model spec to ONNX (fused unless --no-fuse): (exit code, JSON data, text)."""
    import torchtrt_ext

    shapes = shapes_arg(args.input_shape)
    if not shapes:
        raise CliError("export needs --input-shape. Remedy: add --input-shape x:1x3x224x224 (one per input)")
    model = load_model(args.model)
    output = output_path(args.output, spec_file(args.model))
    dtype = dtype_of(args.dtype)
    model = model.to(dtype=dtype)  # the random inputs are of --dtype, so the weights must be too
    examples = examples_for(shapes, model, dtype, "cpu", parse_ranges(args.input_range))
    started = time.monotonic()
    with ticking(f"exporting {args.model}", enabled=not args.quiet):
        onnx_model = torchtrt_ext.export_onnx(model, examples, exporter=args.exporter, opset=args.opset,
                                              dynamic_shapes={} if args.static else None,
                                              functions=not args.no_functions)
    onnx_model = pipeline(onnx_model, fuse=not args.no_fuse)
    if not args.no_functions:  # after the fusion, so the L2Norm nodes it made get their function too
        from torchtrt_ext.passes.functions import add_functions
        add_functions(onnx_model)
    save_onnx(onnx_model, output)
    custom = custom_nodes(onnx_model)
    props = {p.key: p.value for p in onnx_model.metadata_props}
    data = {"output": str(args.output), "exporter": props.get("torchtrt_ext.exporter"),
            "inputs": [i.name for i in onnx_model.graph.input], "outputs": [o.name for o in onnx_model.graph.output],
            "nodes": len(onnx_model.graph.node), "custom_nodes": custom, "seconds": round(time.monotonic() - started, 2)}
    text = (f"wrote {args.output}: {data['nodes']} nodes, custom nodes {custom or 'none'}, inputs {data['inputs']}, "
            f"outputs {data['outputs']} ({data['exporter']} exporter, {data['seconds']} s)")
    return ExitCode.OK, data, text


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], **kw: Any) -> None:
    """Add the ``export`` subcommand to the subparsers ``sub`` (``kw``: what every subcommand shares)."""
    p = sub.add_parser("export", help="PyTorch model -> ONNX (custom ops as torchtrt_ext nodes)",
                       description="Export a model (module:factory) to ONNX with dynamic batch.", **kw)
    p.add_argument("model", help="model spec: package.module:factory or path/to/file.py:factory")
    add_inputs(p)
    p.add_argument("-o", "--output", required=True, help="path of the .onnx file to write")
    p.add_argument("--exporter", choices=("auto", "dynamo", "legacy"), default="auto", help="default auto")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default 18)")
    p.add_argument("--static", action="store_true", help="all dims static (default: batch dynamic)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--no-fuse", action="store_true", help="write the export as it is, without the fusion passes "
                   "compile() runs (L2 normalization patterns -> L2Norm nodes)")
    p.add_argument("--no-functions", action="store_true", help="write the custom nodes without their decompositions "
                   "as ONNX functions (then only a runtime with the plugins runs the file)")
    add_common(p)
    p.set_defaults(handler=run)
