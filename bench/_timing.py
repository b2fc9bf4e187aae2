"""Device timing shared by the kernel benchmarks: CUDA events, L2 flushed before every timed run."""
from __future__ import annotations

from typing import Any, Callable

import torch

L2_FLUSH_BYTES = 256 << 20  # several times the H200's 60 MB L2, as triton.testing.do_bench flushes


class DeviceTimer:
    """Median and P95 (µs) of one callable's device time after ``warmup`` runs, L2 flushed before every timed run."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def __call__(self, fn: Callable[[], Any], reps: int) -> tuple[float, float]:
        for _ in range(self.warmup):
            fn()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))  # type: ignore[no-untyped-call]
                  for _ in range(reps)]
        for start, end in events:
            self.flush.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        times = sorted(start.elapsed_time(end) * 1e3 for start, end in events)
        return times[len(times) // 2], times[min(len(times) - 1, int(0.95 * len(times)))]


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64."""
    return float(((out.double() - ref.double()).norm() / ref.double().norm()).item())
