"""Argument parsing shared by the subcommands: shape strings, paths, and the flags several subcommands take."""
from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torchtrt_ext._files import same_file
from torchtrt_ext.cli._errors import CliError

DTYPES = ("float32", "float16", "bfloat16")


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1x3x224x224"`` -> ``(1, 3, 224, 224)``; dims are integers >= 0 separated by 'x'."""
    parts = text.strip().lower().split("x")
    if not text.strip() or not all(p.isdigit() for p in parts):
        raise CliError(f"bad shape {text!r}: expected integers separated by 'x'. Remedy: write it like 1x3x224x224")
    return tuple(int(p) for p in parts)


def parse_named_shapes(text: str, *, allow_unnamed: bool = False) -> dict[str, tuple[int, ...]]:
    """``"x:1x3x64x64,y:1x8"`` -> ``{"x": (1, 3, 64, 64), "y": (1, 8)}`` (unnamed entries get "#0", "#1", ...)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for index, item in enumerate(t for t in text.split(",") if t.strip()):
        name, sep, shape = item.strip().rpartition(":")
        if not sep and not allow_unnamed:
            raise CliError(f"bad shape {item!r}: no input name. Remedy: write name:1x3x224x224 (comma-separated "
                           "for several inputs)")
        if sep and name in shapes:  # a dict would keep the last silently
            raise CliError(f"bad shape list {text!r}: it names input {name!r} twice. Remedy: give each input once")
        shapes[name if sep else f"#{index}"] = parse_shape(shape)
    if not shapes:
        raise CliError(f"bad shape list {text!r}: empty. Remedy: write name:1x3x224x224")
    return shapes


def shapes_arg(values: Sequence[str] | None, *, allow_unnamed: bool = True) -> dict[str, tuple[int, ...]]:
    merged: dict[str, tuple[int, ...]] = {}
    for value in values or ():
        for name, shape in parse_named_shapes(value, allow_unnamed=allow_unnamed).items():
            if name in merged and not name.startswith("#"):
                raise CliError(f"--input-shape names input {name!r} twice. Remedy: give each input once")
            merged[name if not name.startswith("#") else f"#{len(merged)}"] = shape
    return merged


def parse_ranges(values: Sequence[str] | None) -> dict[str, tuple[float, float]]:
    """``["ids:0,30000", "x:-1.5,1.5"]`` -> ``{"ids": (0, 30000), "x": (-1.5, 1.5)}``; integers stay ``int``."""
    ranges: dict[str, tuple[float, float]] = {}
    for text in values or ():
        name, sep, bounds = text.strip().rpartition(":")
        parts = bounds.split(",")
        try:
            low, high = (int(v) if v.strip().lstrip("+-").isdigit() else float(v) for v in parts)
        except ValueError:
            low = high = 0
        if not sep or not name or len(parts) != 2 or not low < high:
            raise CliError(f"bad input range {text!r}: expected name:LOW,HIGH with LOW < HIGH. Remedy: write it like "
                           "ids:0,30000 (integers in [0, 30000)) or x:-1.5,1.5 (floats)")
        ranges[name] = (low, high)
    return ranges


def dtype_of(name: str) -> Any:
    """The torch dtype of a --dtype name."""
    import torch

    return getattr(torch, name)


def existing(path_text: str, what: str) -> Path:
    """``path_text`` as a Path when it is a file, else a CliError naming it as ``what``."""
    path = Path(path_text)
    if not path.is_file():
        raise CliError(f"{what} {path} does not exist. Remedy: check the path")
    return path


def output_path(text: str, *inputs: str | os.PathLike[str] | None) -> Path:
    """The file a subcommand writes (-o): never one of its inputs, in a folder that exists."""
    path = Path(text)
    for source in inputs:
        if source is not None and same_file(path, source):
            raise CliError(f"-o {text} is this command's input {source}: writing there would destroy it. Remedy: "
                           "give another output path")
    folder = Path(os.path.realpath(path)).parent
    if not folder.is_dir():
        raise CliError(f"-o {text}: the folder {folder} does not exist. Remedy: create it first (mkdir -p {folder}) "
                       "or check the path")
    return path


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return int(text)


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout instead of text")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging and tracebacks on errors")


def add_engine_host_code(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-engine-host-code", action="store_true",
                   help="let an engine that carries an embedded plugin library (built with embed_plugins=True) load "
                        "and run that library's code; only for engine files you trust (default: refused)")


def add_plugin_libraries(p: argparse.ArgumentParser) -> None:
    p.add_argument("--plugin-library", action="append", metavar="PATH", dest="plugin_libraries",
                   help="your own TensorRT plugin library serving custom nodes of your domains (repeatable); an "
                        "engine built with one needs the same file (same SHA-256) named where it is loaded")


def add_inputs(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--input-shape", action="append", metavar="NAME:SHAPE", required=required,
                   help="input shape like x:1x3x224x224 (repeat or comma-separate for several inputs; a bare "
                        "1x3x224x224 means the next input in order)")
    p.add_argument("--dtype", choices=DTYPES, default="float32",
                   help="dtype of the random float inputs (default float32); an input the ONNX model or engine "
                        "declares as integer or bool gets that type")
    p.add_argument("--input-range", action="append", metavar="NAME:LOW,HIGH",
                   help="values of a random input: integers in [LOW, HIGH) (an input of a model spec given integer "
                        "bounds is int64), floats in [LOW, HIGH] (repeat for several inputs; default: integers in "
                        "[0, 8), floats ~ N(0, 1))")

