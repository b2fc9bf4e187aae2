"""``torchtrt-ext build``: an ONNX file -> an engine file."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from torchtrt_ext.backend.adapter import BACKENDS
from torchtrt_ext.backend.plugins import PLUGIN_MODES
from torchtrt_ext.cli._args import (
    add_common,
    add_plugin_libraries,
    existing,
    output_path,
    parse_named_shapes,
    positive_int,
)
from torchtrt_ext.cli._errors import CliError
from torchtrt_ext.cli._targets import custom_nodes
from torchtrt_ext.passes import pipeline
from torchtrt_ext.errors import ExitCode
from torchtrt_ext.passes.onnx_util import read_onnx
from torchtrt_ext.passes.precision import PRECISIONS

MAX_WORKSPACE_MIB = 1 << 20  # the --workspace cap where no GPU is visible


def _profiles(args: argparse.Namespace) -> dict[str, tuple[tuple[int, ...], ...]] | None:
    lo, opt, hi = (parse_named_shapes(v) if v else None for v in (args.min_shapes, args.opt_shapes, args.max_shapes))
    if lo is None and opt is None and hi is None:
        return None
    if opt is not None and lo is None and hi is None:  # trtexec's --shapes: one static profile
        lo = hi = opt
    if lo is None or hi is None:
        raise CliError("--min-shapes and --max-shapes go together (with --opt-shapes, or --opt-shapes alone for a "
                       "static profile). Remedy: give all three, like trtexec")
    opt = opt if opt is not None else hi
    if not set(lo) == set(opt) == set(hi):
        raise CliError(f"the shape flags name different inputs ({sorted(lo)}, {sorted(opt)}, {sorted(hi)}). "
                       "Remedy: name the same inputs in --min-shapes, --opt-shapes and --max-shapes")
    return {name: (lo[name], opt[name], hi[name]) for name in lo}


def _workspace_bytes(mib: int) -> int:
    """--workspace in bytes; refused above the memory of the GPU torch sees, or above ``MAX_WORKSPACE_MIB`` without
    one (a cap TensorRT would take and never reach, hiding a typo)."""
    import torch

    limit, what = MAX_WORKSPACE_MIB, f"{MAX_WORKSPACE_MIB} MiB (1 TiB, more than any GPU has)"
    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        limit = torch.cuda.get_device_properties(index).total_memory >> 20
        what = f"the {limit} MiB of {torch.cuda.get_device_name(index)}"
    if mib > limit:
        raise CliError(f"--workspace {mib} (MiB) is more than {what}. Remedy: give the cap in MiB, at most the GPU's "
                       "memory (the default 4096 suits most models), or leave --workspace out")
    return mib << 20


def run(args: argparse.Namespace) -> tuple[int, Any, str]:
    """Build an engine file from an ONNX file: (exit code, JSON data, text)."""
    onnx_path = existing(args.onnx, "ONNX file")
    output = output_path(args.output, onnx_path)
    profiles = _profiles(args)
    if args.timing_cache is not None and args.backend == "tensorrt_rtx":
        raise CliError("--timing-cache with --backend tensorrt_rtx: torchtrt_ext builds TensorRT-RTX engines without "
                       "a timing cache (TensorRT-RTX compiles its kernels on the GPU at run time), so the file would be "
                       "neither read nor written. Remedy: drop --timing-cache for TensorRT-RTX builds")
    workspace = _workspace_bytes(args.workspace) if args.workspace is not None else None
    model = pipeline(read_onnx(onnx_path), fuse=not args.no_fuse)
    from torchtrt_ext.backend import build_engine

    started = time.monotonic()
    if not args.quiet and not args.json:
        print(f"[torchtrt-ext] building {onnx_path.name} with {args.backend} ({args.precision}, plugins "
              f"{args.plugins}) ...", file=sys.stderr, flush=True)
    kwargs: dict[str, Any] = {"backend": args.backend, "precision": args.precision, "profiles": profiles,
                              "plugins": args.plugins, "progress": not args.quiet,
                              "plugin_libraries": args.plugin_libraries}
    if workspace is not None:
        kwargs["workspace"] = workspace
    if args.timing_cache is not None:
        kwargs["timing_cache"] = args.timing_cache
    engine = build_engine(model, **kwargs)
    engine.save(output)
    meta = engine.metadata
    seconds = round(time.monotonic() - started, 2)
    data = {"output": str(args.output), "bytes": len(engine.plan), "seconds": seconds,
            "custom_nodes": custom_nodes(model), **meta.to_json()}
    text = (f"wrote {args.output}: {len(engine.plan) / 1e6:.2f} MB, {meta.describe_target()}, precision "
            f"{meta.options.precision}, plugins {meta.plugin_mode}, {len(meta.profiles)} profile(s), {seconds} s")
    return ExitCode.OK, data, text


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], **kw: Any) -> None:
    """Add the ``build`` subcommand to the subparsers ``sub`` (``kw``: what every subcommand shares)."""
    p = sub.add_parser("build", help="ONNX -> engine file", description="Build an engine from an ONNX file.", **kw)
    p.add_argument("onnx", help="the .onnx file")
    p.add_argument("-o", "--output", required=True, help="path of the engine file to write")
    p.add_argument("--backend", choices=BACKENDS, default="tensorrt", help="default tensorrt")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help="default fp32")
    p.add_argument("--plugins", choices=PLUGIN_MODES, default="auto",
                   help="custom nodes: C++ plugins, Python plugins, or decomposed into standard ops (default auto)")
    for which in ("min", "opt", "max"):
        p.add_argument(f"--{which}-shapes", metavar="NAME:SHAPE,...", help=f"{which} shapes of the profile, like "
                       "x:1x3x64x64,y:1x8 (default: batch 1..32 around the graph's shapes)")
    p.add_argument("--no-fuse", action="store_true", help="build the graph as it is, without the fusion passes "
                   "compile() runs (L2 normalization patterns -> L2Norm nodes)")
    p.add_argument("--workspace", type=positive_int, metavar="MiB", help="workspace cap in MiB (default 4096)")
    p.add_argument("--timing-cache", metavar="PATH", help="TensorRT timing cache file, read and written back "
                   "(--backend tensorrt only)")
    add_plugin_libraries(p)
    p.add_argument("-q", "--quiet", "--no-progress", action="store_true", help="no progress lines on stderr")
    add_common(p)
    p.set_defaults(handler=run)
