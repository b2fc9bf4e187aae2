"""Device timing shared by the kernel benchmarks: CUDA events, L2 flushed before every timed run."""
from __future__ import annotations

from typing import Any, Callable

import torch

L2_FLUSH_BYTES = 256 << 20  # several times the H200's 60 MB L2, as triton.testing.do_bench flushes


class DeviceTimer:
    """Median and P95 (µs) of callables' device times after ``warmup`` runs, L2 flushed before every timed run."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def __call__(self, fn: Callable[[], Any], reps: int) -> tuple[float, float]:
        return self.interleaved({"fn": fn}, reps)["fn"]

    def interleaved(self, fns: dict[str, Callable[[], Any]], reps: int) -> dict[str, tuple[float, float]]:
        """(median, P95) in µs per callable; rep i of every callable runs before rep i + 1 of any, so clock and power
        swings of the card (seen on an H200 as ±0.6 µs on a 6 µs kernel, alternating every few tens of ms) fall on
        all of them alike instead of on whichever was timed in a slow stretch."""
        for fn in fns.values():
            for _ in range(self.warmup):
                fn()
        events = {name: [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))  # type: ignore[no-untyped-call]
                         for _ in range(reps)] for name in fns}
        for i in range(reps):
            for name, fn in fns.items():
                start, end = events[name][i]
                self.flush.zero_()
                start.record()
                fn()
                end.record()
        torch.cuda.synchronize()
        result = {}
        for name, pairs in events.items():
            times = sorted(start.elapsed_time(end) * 1e3 for start, end in pairs)
            result[name] = (times[len(times) // 2], times[min(len(times) - 1, int(0.95 * len(times)))])
        return result


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64."""
    return float(((out.double() - ref.double()).norm() / ref.double().norm()).item())
