"""A detection-style model with an SSD-like L2Norm head at 640x640 on the GPU: eager PyTorch vs torch.compile vs eager
with our L2Norm kernel, batch 1 and 8, float32 and float16, in one run and one table.

    python bench/detector.py [--batches 1,8] [--dtypes float32,float16] [--warmup 50] [--iters 200] [--no-compile]
                             [--json results.json]

The model: a stride-8 backbone (three 3x3 convs) to a 512x80x80 feature map, the L2Norm head (normalize over
channels, times a learned per-channel scale initialised to 20, as SSD's conv4_3 Normalize), then 3x3 class and box
convs (4 anchors, 80 classes). Three versions share the weights and differ only in the normalization:

- ``eager PyTorch``: ``x / x.norm(dim=1, keepdim=True).clamp_min(eps)``, the spelling that exports as ReduceL2 -> Div;
- ``torch.compile``: the same model through ``torch.compile`` (inductor, default mode);
- ``eager + our kernel``: ``torchtrt_ext.nn.L2Norm``, which on CUDA calls the kernel in libtorchtrt_ext_kernels.so
  (the header says when the library is missing and the op fell back to PyTorch math).

The ``head`` rows time the normalization alone on the model's feature tensor, with ``copy`` (``x.clone()``: one read
and one write, what any L2Norm must move at least) as the bandwidth ceiling; GB/s counts that read and write. No L2
flush between runs: at batch 1 the feature map (6.5 MB in float16) stays in the 50 MB L2, so those GB/s can exceed
HBM bandwidth — the comparison with ``copy`` is what matters. Timing: ``torchtrt_ext.benchmark`` (CUDA events around
every run, P50/P95). ``max abs err``: model rows against the eager PyTorch model, head rows against a float64
reference, both on the timed input.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time

import torch

import torchtrt_ext
from torchtrt_ext.bench import BenchmarkReport, benchmark
from torchtrt_ext.validate import format_table, validate

EPS = 1e-6
SIZE = 640
WIDTH = 512
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


class EagerL2Norm(torch.nn.Module):
    """The plain PyTorch spelling of a detection head's L2 normalization."""

    def __init__(self, dim: int = 1, eps: float = EPS) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / x.norm(dim=self.dim, keepdim=True).clamp_min(self.eps)


class Detector(torch.nn.Module):
    """Backbone to stride 8, L2Norm head with a learned scale, class and box convolutions."""

    def __init__(self, norm: torch.nn.Module, num_classes: int = 80, anchors: int = 4) -> None:
        super().__init__()
        self.backbone = torch.nn.Sequential(
            torch.nn.Conv2d(3, 64, 3, stride=2, padding=1), torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(64, 128, 3, stride=2, padding=1), torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(128, WIDTH, 3, stride=2, padding=1), torch.nn.ReLU(inplace=True))
        self.norm = norm
        self.scale = torch.nn.Parameter(torch.full((1, WIDTH, 1, 1), 20.0))
        self.cls = torch.nn.Conv2d(WIDTH, anchors * num_classes, 3, padding=1)
        self.box = torch.nn.Conv2d(WIDTH, anchors * 4, 3, padding=1)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone(x)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        f = self.norm(self.backbone(x)) * self.scale
        return {"scores": self.cls(f), "boxes": self.box(f)}


def kernel_status() -> str:
    try:
        from torchtrt_ext import _native
        return f"our kernel: {_native.kernels_library_path()}"
    except Exception as exc:  # noqa: BLE001 - reported in the header, the op falls back to PyTorch math
        return f"our kernel: NOT LOADED ({type(exc).__name__}: {exc}); 'our kernel' rows run PyTorch math"


def max_abs_err(reference, candidate, x: torch.Tensor) -> float:
    report = validate(reference, candidate, (x,), trials=1, atol=1e9, rtol=0.0)
    return max(o.max_abs_diff or 0.0 for o in report.outputs)


def run_config(batch: int, dtype: torch.dtype, args: argparse.Namespace, eager: Detector,
               ours: Detector) -> tuple[list[BenchmarkReport], dict[str, float], dict[str, float]]:
    label = f"b{batch} {SHORT[dtype]}"
    eager_m, ours_m = copy.deepcopy(eager).to(dtype), copy.deepcopy(ours).to(dtype)
    x = torch.randn(batch, 3, args.size, args.size, generator=torch.Generator().manual_seed(0)).to(args.device, dtype)
    with torch.no_grad():
        feat = eager_m.features(x).contiguous()
    naive = EagerL2Norm()
    model_rows = {"eager PyTorch": eager_m}
    head_rows = {"eager PyTorch": naive}
    if not args.no_compile:
        model_rows["torch.compile"] = torch.compile(eager_m, dynamic=False)
        head_rows["torch.compile"] = torch.compile(EagerL2Norm(), dynamic=False)
    model_rows["eager + our kernel"] = ours_m
    head_rows["our kernel"] = torchtrt_ext.nn.L2Norm(dim=1, eps=EPS)
    head_rows["copy (ceiling)"] = torch.clone

    started = time.monotonic()
    model_report = benchmark(model_rows, x, warmup=args.warmup, iters=args.iters, group=f"model {label}")
    head_report = benchmark(head_rows, feat, warmup=args.warmup, iters=args.iters, group=f"head {label}")
    model_err = {name: max_abs_err(eager_m, fn, x) for name, fn in model_rows.items() if name != "eager PyTorch"}
    reference = lambda t: EagerL2Norm()(t.double())  # noqa: E731
    head_err = {name: max_abs_err(reference, fn, feat) for name, fn in head_rows.items() if name != "copy (ceiling)"}
    done = "; ".join(f"{r.group.split()[0]} {r.name} {r.p50_ms:.3f}/{r.p95_ms:.3f} ms" if r.ok else f"{r.name} FAILED"
                     for rep in (model_report, head_report) for r in rep.rows)
    print(f"[detector] {label} ({time.monotonic() - started:.1f} s): {done}", file=sys.stderr, flush=True)
    return [model_report, head_report], model_err, head_err | {"bytes": 2 * feat.numel() * feat.element_size()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--dtypes", default="float32,float16")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile rows")
    parser.add_argument("--json", help="also write the rows as JSON to this path")
    parser.add_argument("--size", type=int, default=SIZE, help=f"input height and width (default {SIZE})")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a host-timed smoke run)")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench/detector.py needs a CUDA GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 3
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    eager = Detector(EagerL2Norm()).to(args.device).eval()
    ours = copy.deepcopy(eager)
    ours.norm = torchtrt_ext.nn.L2Norm(dim=1, eps=EPS)

    rows, reports = [], []
    for dtype in (DTYPES[d] for d in args.dtypes.split(",")):
        for batch in (int(b) for b in args.batches.split(",")):
            config_reports, model_err, head_err = run_config(batch, dtype, args, eager, ours)
            reports += config_reports
            for report, errs in zip(config_reports, (model_err, head_err)):
                for r in report.rows:
                    gbps = (head_err["bytes"] / (r.p50_ms / 1e3) / 1e9 if r.group.startswith("head") and r.p50_ms
                            else None)
                    err = errs.get(r.name)
                    if r.error:
                        cells = [f"FAILED: {r.error}", "", "", "", "", ""]
                    else:
                        cells = [f"{r.p50_ms:.3f}", f"{r.p95_ms:.3f}", f"{r.throughput:,.0f}", f"{r.speedup:.2f}x",
                                 "-" if gbps is None else f"{gbps:,.0f}", "-" if err is None else f"{err:.2e}"]
                    rows.append([r.group, r.name, *cells])
    merged = BenchmarkReport.concat(reports)
    where = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU (smoke run)"
    print(f"device: {where}; torch {torch.__version__}; {kernel_status()}")
    print(f"{merged.timer}; {args.warmup} warm-up + {args.iters} timed runs per row; input {args.size}x{args.size}, "
          f"feature map {WIDTH}x{args.size // 8}x{args.size // 8}; speedup = first row of the group (P50) / this row (P50)")
    print(format_table(["group", "candidate", "P50 ms", "P95 ms", "img/s", "speedup", "GB/s", "max abs err"], rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(merged.to_json(), handle, indent=2)
    return 1 if merged.failed else 0


if __name__ == "__main__":
    sys.exit(main())
