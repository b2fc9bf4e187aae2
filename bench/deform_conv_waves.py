"""Where a fused DeformConv2d tile's time goes: the fused kernel's time against its reduction length at exact waves.

    python bench/deform_conv_waves.py [--waves 1,2,3] [--channels 64,128,256,512] [--calls 30]

fp16, channels-last input (no transpose), 256 output channels, 3x3, the offsets and mask of ``deform_conv.case_inputs``;
the images are N x 64 x 66 pixels, so that N = 4 * waves makes the 128-pixel tiles fill exactly `waves` waves of an
H100/H200's 132 multiprocessors, and the input channels set the reduction blocks a tile takes (9 per 64 channels).
Prints the mean device µs per call (torch.profiler, deform_conv._kernel_times) of the kernels whose name holds "fused"
plus the weight reorder, and per wave count the least-squares slope (µs per reduction block) and intercept (µs a call
pays besides its blocks).
"""
from __future__ import annotations

import argparse
from typing import Callable

import torch

from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full
from deform_conv import _kernel_times, case_inputs  # bench/ on sys.path when run from bench/


def wave_shape(waves: int, cin: int) -> tuple[int, int, int, int, int]:
    """(n, cin, cout, h, w) whose 128-pixel tiles fill exactly `waves` waves of 132 multiprocessors: 4 waves x cin ->
    256 x 64 x 66."""
    return 4 * waves, cin, 256, 64, 66


def warm_channels_last_call(shape: tuple[int, int, int, int, int], dtype: torch.dtype) -> Callable[[], None]:
    """One launcher call on deform_conv.case_inputs of `shape` (n, cin, cout, h, w) with a channels-last input, after
    5 calls of it and a synchronize."""
    x, off, msk, wt, b = case_inputs(*shape, dtype)
    x = x.contiguous(memory_format=torch.channels_last)
    one = (1, 1)

    def call() -> None:
        deform_conv2d_full(x, off, wt, b, msk, one, one, one, 1, 1)

    for _ in range(5):
        call()
    torch.cuda.synchronize()
    return call


def fused_us(waves: int, cin: int, calls: int) -> float:
    """Mean device µs per call of the fused kernel and the weight reorder at wave_shape(waves, cin), fp16."""
    call = warm_channels_last_call(wave_shape(waves, cin), torch.float16)
    return sum(us for name, us in _kernel_times(call, calls).items() if "fused" in name or "prepareFused" in name)


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope and intercept of ys against xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waves", default="1,2,3")
    parser.add_argument("--channels", default="64,128,256,512", help="input channels (multiples of 64)")
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    channels = [int(c) for c in args.channels.split(",")]
    blocks = [9 * c // 64 for c in channels]  # reduction blocks a tile: 9 taps of each 64 channels
    print(f"# {torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).multi_processor_count} SMs")
    print("| waves | " + " | ".join(f"{k} blocks" for k in blocks) + " | µs a block | intercept µs |")
    print("|---" * (len(channels) + 3) + "|")
    for waves in (int(w) for w in args.waves.split(",")):
        us = [fused_us(waves, c, args.calls) for c in channels]
        slope, intercept = fit([float(k) for k in blocks], us)
        print(f"| {waves} | " + " | ".join(f"{u:.1f}" for u in us) + f" | {slope:.3f} | {intercept:.1f} |", flush=True)


if __name__ == "__main__":
    main()
