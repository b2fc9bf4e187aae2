"""Host-inclusive time per call of the eager ops against the PyTorch code they replace (issue 21), on the GPU.

    python bench/overhead.py [--calls 200] [--batches 30] [--dtype float32] [--no-large] [--json FILE]

A batch is ``--calls`` calls of one method back to back and one ``torch.cuda.synchronize()``, timed on the host
(``time.perf_counter``); its time divided by the calls is the µs per call, host included (Python, dispatch, launch,
and the GPU time where the host cannot run ahead). The methods take turns batch by batch, ``--batches`` batches each
after a warm-up batch; the tables give the median (P50) and P95 over the batches, and each method's P50 over the
cheapest PyTorch spelling of the same op (``x / x.norm(dim=1, keepdim=True)`` or ``F.normalize`` for L2Norm,
``torchvision.ops.deform_conv2d`` for DeformConv2d). ``x.clone()`` and ``F.conv2d`` are floors for reference, not
spellings of the op. The launcher target compares ``ops.l2norm`` with ``l2norm_cuda``, the public launcher call (its
own argument checks, the output allocated as the op allocates it, the launch); ``l2norm_cuda_unchecked`` is the part of
it the op calls once its checks (made once per call signature) have passed, so ``ops.l2norm`` minus that row is the
op's own host time. The last lines judge the issue's targets; the large shapes are those of bench/kernels.py and
bench/deform_conv.py (skip them with --no-large).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

import torch
import torch.nn.functional as F

import torchtrt_ext
from torchtrt_ext import ops
from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full
from torchtrt_ext.ops._l2norm_cuda import l2norm_cuda, l2norm_cuda_unchecked

L2NORM_SMALL = [(1, 64, 80, 80), (1, 512, 38, 38)]
L2NORM_LARGE = [(8, 256, 128, 128), (4, 1024, 64, 64)]  # bench/kernels.py's NCHW cases (dim 1)
DCN_SMALL = [(1, 64, 40, 40), (1, 256, 20, 20)]  # (N, C_in = C_out, H, W), 3x3, padding 1, bias and mask
DCN_LARGE = [(8, 256, 64, 64), (8, 256, 80, 80), (4, 128, 100, 76)]  # bench/deform_conv.py's large cases
LAUNCHER_LIMIT = 1.3  # ops.l2norm within this factor of its direct launcher call
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
Method = Callable[[], Any]


def time_methods(methods: dict[str, Method], calls: int, batches: int) -> dict[str, tuple[float, float]]:
    """P50 and P95 (µs per call, host-inclusive) of each method over ``batches`` batches of ``calls`` calls."""
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for fn in methods.values():  # warm-up: first-call checks, caches, allocator
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    for _ in range(batches):
        for name, fn in methods.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - start) * 1e6 / calls)
    out = {}
    for name, times in samples.items():
        times.sort()
        out[name] = (times[len(times) // 2], times[min(len(times) - 1, int(0.95 * len(times)))])
    return out


def l2norm_methods(shape: tuple[int, ...], dtype: torch.dtype) -> dict[str, Method]:
    """The L2Norm spellings on one input; the first two are PyTorch's."""
    x = torch.randn(shape, device="cuda", dtype=dtype)
    module = torchtrt_ext.nn.L2Norm(dim=1)
    return {
        "x / x.norm(dim=1, keepdim=True)": lambda: x / x.norm(dim=1, keepdim=True),
        "F.normalize(x, dim=1)": lambda: F.normalize(x, dim=1),
        "ops.l2norm(x, dim=1)": lambda: ops.l2norm(x, dim=1),
        "nn.L2Norm(dim=1)(x)": lambda: module(x),
        "l2norm_cuda (direct launcher)": lambda: l2norm_cuda(x, 1, 1e-6),
        "l2norm_cuda_unchecked (what the op calls)": lambda: l2norm_cuda_unchecked(x, 1, 1e-6),
        "x.clone()": lambda: x.clone(),
    }


def dcn_methods(n: int, c: int, h: int, w: int, dtype: torch.dtype) -> dict[str, Method]:
    """The DeformConv2d spellings (3x3, padding 1, bias and mask); the first is PyTorch's (torchvision)."""
    from torchvision.ops import deform_conv2d as tv_deform_conv2d

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, c, h, w, device="cuda", generator=gen).to(dtype)
    off = (torch.randn(n, 18, h, w, device="cuda", generator=gen) * 2).to(dtype)
    mask = torch.rand(n, 9, h, w, device="cuda", generator=gen).to(dtype)
    module = torchtrt_ext.nn.DeformConv2d(c, c, 3, padding=1).to(device="cuda", dtype=dtype)
    wt, b = module.weight.detach(), module.bias.detach()  # type: ignore[union-attr]
    one = (1, 1)
    return {
        "torchvision.ops.deform_conv2d": lambda: tv_deform_conv2d(x, off, wt, b, padding=1, mask=mask),
        "ops.deform_conv2d": lambda: ops.deform_conv2d(x, off, wt, b, mask=mask, padding=1),
        "nn.DeformConv2d under no_grad": lambda: _no_grad(module, x, off, mask),
        "deform_conv2d_full (direct launcher)": lambda: deform_conv2d_full(x, off, wt, b, mask, one, one, one, 1, 1),
        "F.conv2d": lambda: F.conv2d(x, wt, b, padding=1),
    }


def _no_grad(module: torch.nn.Module, *args: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        out: torch.Tensor = module(*args)
    return out


def table(title: str, columns: list[str], results: list[dict[str, tuple[float, float]]],
          spellings: int) -> list[str]:
    """A Markdown table: one row per method, per column 'P50 (P95) ×ratio to the cheapest of the first
    ``spellings`` methods'."""
    lines = [f"### {title}", "", "| call | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for name in results[0]:
        cells = []
        for res in results:
            cheapest = min(res[m][0] for m in list(res)[:spellings])
            p50, p95 = res[name]
            cells.append(f"{p50:.1f} ({p95:.1f}) ×{p50 / cheapest:.2f}")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return lines + [""]


def verdicts(l2: list[dict], l2_large: list[dict], dcn: list[dict], dcn_large: list[dict]) -> list[str]:
    """The issue's targets, judged on the P50s."""
    out = []
    for shape, res in zip(L2NORM_SMALL, l2):
        op, div, launcher = (res[m][0] for m in ("ops.l2norm(x, dim=1)", "x / x.norm(dim=1, keepdim=True)",
                                                 "l2norm_cuda (direct launcher)"))
        out.append(f"ops.l2norm {shape}: {op:.1f} us vs x/x.norm {div:.1f} us -> {'met' if op <= div else 'NOT MET'}; "
                   f"vs launcher {op / launcher:.2f}x (<= {LAUNCHER_LIMIT}) -> "
                   f"{'met' if op <= LAUNCHER_LIMIT * launcher else 'NOT MET'}")
    for shape, res in zip(DCN_SMALL, dcn):
        op, tv = res["ops.deform_conv2d"][0], res["torchvision.ops.deform_conv2d"][0]
        out.append(f"ops.deform_conv2d {shape}: {op:.1f} us vs torchvision {tv:.1f} us -> "
                   f"{'met' if op <= tv else 'NOT MET'}")
    slower = [f"L2Norm {s}" for s, r in zip(L2NORM_SMALL + L2NORM_LARGE, l2 + l2_large)
              if r["ops.l2norm(x, dim=1)"][0] > min(r[m][0] for m in list(r)[:2])]
    slower += [f"DeformConv2d {s}" for s, r in zip(DCN_SMALL + DCN_LARGE, dcn + dcn_large)
               if r["ops.deform_conv2d"][0] > r["torchvision.ops.deform_conv2d"][0]]
    out.append("no eager op slower than its PyTorch counterpart at any shape timed: "
               + ("met" if not slower else "NOT MET at " + ", ".join(slower)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per batch (between synchronizes)")
    parser.add_argument("--batches", type=int, default=30, help="timed batches per method")
    parser.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    parser.add_argument("--no-large", action="store_true", help="skip bench/kernels.py's and deform_conv.py's shapes")
    parser.add_argument("--json", help="also write the results as JSON to this file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench/overhead.py needs a CUDA GPU", file=sys.stderr)
        return 1
    dt = DTYPES[args.dtype]
    large_calls = max(1, args.calls // 10)
    l2 = [time_methods(l2norm_methods(s, dt), args.calls, args.batches) for s in L2NORM_SMALL]
    dcn = [time_methods(dcn_methods(*s, dt), args.calls, args.batches) for s in DCN_SMALL]
    l2_large = [] if args.no_large else [time_methods(l2norm_methods(s, dt), large_calls, args.batches)
                                         for s in L2NORM_LARGE]
    dcn_large = [] if args.no_large else [time_methods(dcn_methods(*s, dt), large_calls, args.batches)
                                          for s in DCN_LARGE]
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dtype}; µs per call, host included: "
          f"P50 (P95) over {args.batches} batches of {args.calls} calls ({large_calls} at the large shapes), "
          "×P50 over the cheapest PyTorch spelling\n")
    l2_shapes = L2NORM_SMALL + (L2NORM_LARGE if l2_large else [])
    dcn_shapes = DCN_SMALL + (DCN_LARGE if dcn_large else [])
    lines = table("L2Norm, dim 1", [str(s) for s in l2_shapes], l2 + l2_large, spellings=2)
    lines += table("DeformConv2d, 3x3, padding 1, bias and mask (N, C_in = C_out, H, W)",
                   [str(s) for s in dcn_shapes], dcn + dcn_large, spellings=1)
    lines += ["### Targets", ""] + [f"- {v}" for v in verdicts(l2, l2_large, dcn, dcn_large)]
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"l2norm": l2 + l2_large, "deform_conv2d": dcn + dcn_large}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
