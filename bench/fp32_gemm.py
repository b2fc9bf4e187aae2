"""Why DeformConv2d's float32 GEMM runs as bf16 pairs: error and time of the ways to multiply in float32 on a GPU.

    python bench/fp32_gemm.py [--warmup 10] [--reps 50]

The GEMM of each large DeformConv2d case of bench/deform_conv.py (weight [C', C*9] times columns [C*9, N*H*W]; random
columns, some masked towards zero, as sampling gives), computed by torch on cuBLAS in each way, against float64:
  fp32         true FP32 (TF32 off): the accuracy to keep
  tf32         one TF32 GEMM: fast, not accurate enough
  3xtf32       TF32 pairs (hi + lo), lo_w*hi_c + hi_w*lo_c in one GEMM, then hi_w*hi_c added (two GEMMs)
  bf16x3       bf16 pairs, the same two GEMMs (float32 output): what the launcher runs
  bf16x3_one   bf16 pairs, all three products in ONE GEMM: shows why the large products are summed apart
Times are device p50 / p95 µs of the GEMMs alone (the split itself is the sampler's job), after an L2 flush.
"""
from __future__ import annotations

import argparse

import torch

from _timing import DeviceTimer, rel_error  # bench/_timing.py (scripts run from bench/ on sys.path)

CASES = [("resnet_stage", 256, 256 * 9, 8 * 64 * 64), ("det_head", 256, 256 * 9, 8 * 80 * 80),
         ("fpn_level", 128, 128 * 9, 4 * 100 * 76)]


def _tf32_round(x: torch.Tensor) -> torch.Tensor:
    """x rounded to nearest TF32 (10 mantissa bits), kept in float32."""
    return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


def _pairs(x: torch.Tensor, dtype: torch.dtype | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) with x ~ hi + lo: bf16 parts for dtype=torch.bfloat16, TF32-rounded float32 parts for None."""
    if dtype is None:
        hi = _tf32_round(x)
        return hi, _tf32_round(x - hi)
    hi = x.to(dtype)
    return hi, (x - hi.float()).to(dtype)


def methods(w: torch.Tensor, c: torch.Tensor) -> dict:
    """name -> (callable giving the float32 product, whether it needs TF32 on)."""
    mm = lambda a, b: torch.mm(a, b, out_dtype=torch.float32)  # noqa: E731 - bf16 in, float32 out
    bw, bc = _pairs(w, torch.bfloat16), _pairs(c, torch.bfloat16)
    tw, tc = _pairs(w, None), _pairs(c, None)
    cross_b = (torch.cat([bw[1], bw[0]], 1), torch.cat([bc[0], bc[1]], 0))
    cross_t = (torch.cat([tw[1], tw[0]], 1), torch.cat([tc[0], tc[1]], 0))
    one_b = (torch.cat([bw[0], bw[1], bw[0]], 1), torch.cat([bc[0], bc[0], bc[1]], 0))
    return {
        "fp32": (lambda: w @ c, False),
        "tf32": (lambda: w @ c, True),
        "3xtf32": (lambda: torch.addmm(cross_t[0] @ cross_t[1], tw[0], tc[0]), True),
        "bf16x3": (lambda: torch.addmm(mm(*cross_b), bw[0], bc[0], out_dtype=torch.float32), False),
        "bf16x3_one": (lambda: mm(*one_b), False),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    timer = DeviceTimer(args.warmup)
    gen = torch.Generator(device="cuda").manual_seed(0)
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print("| case (M×K×N) | method | p50 / p95 µs | rel err vs float64 | time / fp32 |")
    print("|---|---|---|---|---|")
    for name, m, k, n in CASES:
        w = torch.randn(m, k, device="cuda", generator=gen) / k ** 0.5
        c = torch.randn(k, n, device="cuda", generator=gen) * torch.rand(k, n, device="cuda", generator=gen)
        ref = w.double() @ c.double()
        base = None
        for method, (fn, tf32) in methods(w, c).items():
            torch.backends.cuda.matmul.allow_tf32 = tf32
            err = rel_error(fn(), ref)
            p50, p95 = timer(fn, args.reps)
            base = base or p50
            print(f"| {name} ({m}×{k}×{n}) | {method} | {p50:.1f} / {p95:.1f} | {err:.2e} | {p50 / base:.2f} |")
        torch.backends.cuda.matmul.allow_tf32 = False
        del w, c, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
