"""Time DeformConv2d on the GPU: our CUDA path vs torchvision's CUDA op vs the eager PyTorch math vs plain conv2d.

    python bench/deform_conv.py [--dtypes float32,float16] [--warmup 50] [--reps 200] [--eager-reps 20]
                                [--cases resnet_stage,det_head,small] [--no-eager]

Cases follow shared/anchors/dcn_h200.md (3x3, padding 1, one offset group, offsets with sigma = 2 pixels, random
mask). Methods:
  ours        torchtrt_ext's CUDA path: the sampling kernel (csrc/kernels/deform_conv2d.cu) + cuBLAS (torch.matmul);
              in float32 the default error-compensated TF32 GEMM ("3xTF32", FP32-level error; see rel err)
  ours_sgemm  float32 only: the same with a plain FP32 SGEMM (FP32_GEMM="sgemm")
  ours_im2col the sampling kernel alone, with the NCHW -> NHWC copy of the input (in fp32 the split variant)
  torchvision torchvision.ops.deform_conv2d on CUDA
  eager       torchtrt_ext's PyTorch math (torch_deform_conv2d, gather-based, FP32; what runs without the kernel)
  conv        F.conv2d of the same shapes (cuDNN; in fp32 it may use TF32, see the printed flags): the floor
Each timed run is preceded by a 256 MB write that evicts L2 and is timed with CUDA events; median and P95 in µs.
Each method's output is checked against torchvision in float64 on the same (rounded) inputs.
"""
from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F

from torchtrt_ext.ops import _deform_conv2d_cuda
from torchtrt_ext.ops._deform_conv2d_cuda import deform_conv2d_cuda, im2col_cuda
from torchtrt_ext.ops.deform_conv2d import torch_deform_conv2d
from _timing import DeviceTimer, rel_error  # bench/_timing.py (scripts run from bench/ on sys.path)

CASES = [("resnet_stage", 8, 256, 256, 64, 64), ("det_head", 8, 256, 256, 80, 80), ("small", 1, 64, 64, 40, 40)]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float32,float16")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--eager-reps", type=int, default=20)
    parser.add_argument("--cases", default=",".join(c[0] for c in CASES), help="comma-separated case names")
    parser.add_argument("--no-eager", action="store_true", help="skip the (slow) eager PyTorch math")
    args = parser.parse_args()
    from torchvision.ops import deform_conv2d as tv_deform_conv2d

    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, matmul.allow_tf32="
          f"{torch.backends.cuda.matmul.allow_tf32}, cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}")
    timer = DeviceTimer(args.warmup)
    rows = []
    for name, n, cin, cout, h, w in (c for c in CASES if c[0] in args.cases.split(",")):
        for dt in (DTYPES[d] for d in args.dtypes.split(",")):
            gen = torch.Generator(device="cuda").manual_seed(0)
            x = torch.randn(n, cin, h, w, device="cuda", generator=gen).to(dt)
            off = (torch.randn(n, 18, h, w, device="cuda", generator=gen) * 2).to(dt)
            msk = torch.rand(n, 9, h, w, device="cuda", generator=gen).to(dt)
            wt = (torch.randn(cout, cin, 3, 3, device="cuda", generator=gen) * 0.05).to(dt)
            b = torch.randn(cout, device="cuda", generator=gen).to(dt)
            ref = tv_deform_conv2d(x.double(), off.double(), wt.double(), b.double(), padding=1, mask=msk.double())
            ours = lambda: deform_conv2d_cuda(x, off, wt, b, msk, (1, 1), (1, 1), (1, 1), 1, 1)  # noqa: E731

            def ours_sgemm() -> torch.Tensor:
                previous, _deform_conv2d_cuda.FP32_GEMM = _deform_conv2d_cuda.FP32_GEMM, "sgemm"
                try:
                    return ours()
                finally:
                    _deform_conv2d_cuda.FP32_GEMM = previous

            methods = {
                "ours": (ours, args.reps),
                **({"ours_sgemm": (ours_sgemm, args.reps)} if dt == torch.float32 else {}),
                "ours_im2col": (lambda: im2col_cuda(x, off, msk, (3, 3), (1, 1), (1, 1), (1, 1), 1, 1,
                                                   split_tf32=dt == torch.float32), args.reps),
                "torchvision": (lambda: tv_deform_conv2d(x, off, wt, b, padding=1, mask=msk), args.reps),
                **({} if args.no_eager else {"eager": (
                    lambda: torch_deform_conv2d(x, off, wt, b, msk, (1, 1), (1, 1), (1, 1), 1, 1), args.eager_reps)}),
                "conv": (lambda: F.conv2d(x, wt, b, padding=1), args.reps),
            }
            row = {"case": name, "dtype": SHORT[dt], "shape": [n, cin, cout, h, w]}
            for method, (fn, reps) in methods.items():
                try:
                    out = fn()
                    torch.cuda.synchronize()
                    p50, p95 = timer(fn, reps)
                    row[method] = {"p50_us": round(p50, 1), "p95_us": round(p95, 1)}
                    if method not in ("ours_im2col", "conv"):  # conv has no offsets: no reference
                        row[method]["rel_err"] = float(f"{rel_error(out, ref):.2e}")
                except Exception as exc:  # noqa: BLE001 - report and keep timing the others
                    row[method] = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
            rows.append(row)
            print(json.dumps(row), flush=True)
            del x, off, msk, wt, b, ref
            torch.cuda.empty_cache()

    def us(row: dict, m: str) -> str:
        r = row.get(m, {})
        return f"{r['p50_us']:.1f} / {r['p95_us']:.1f}" if "p50_us" in r else "n/a"

    def ratio(row: dict, a: str, b: str) -> str:
        ra, rb = row.get(a, {}), row.get(b, {})
        return f"{ra['p50_us'] / rb['p50_us']:.2f}" if "p50_us" in ra and "p50_us" in rb else "n/a"

    print("\nµs as p50 / p95; tv/ours = torchvision time / ours (higher is better)")
    print("| case | dtype | ours | ours_sgemm | ours im2col | torchvision | eager | conv2d | tv/ours | tv/ours_sgemm | "
          "ours/conv | ours rel err | sgemm rel err | tv rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['dtype']} | {us(r, 'ours')} | {us(r, 'ours_sgemm')} | {us(r, 'ours_im2col')} | "
              f"{us(r, 'torchvision')} | {us(r, 'eager')} | {us(r, 'conv')} | {ratio(r, 'torchvision', 'ours')} | "
              f"{ratio(r, 'torchvision', 'ours_sgemm')} | {ratio(r, 'ours', 'conv')} | "
              f"{r.get('ours', {}).get('rel_err', 'n/a')} | {r.get('ours_sgemm', {}).get('rel_err', 'n/a')} | "
              f"{r.get('torchvision', {}).get('rel_err', 'n/a')} |")


if __name__ == "__main__":
    main()
