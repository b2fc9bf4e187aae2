"""Device timing shared by the kernel benchmarks: CUDA events, L2 flushed before every timed run."""
from __future__ import annotations

from typing import Any, Callable

import torch

L2_FLUSH_BYTES = 256 << 20  # several times the H200's 60 MB L2, as triton.testing.do_bench flushes
HOST_LEAD_US = 200.0  # the GPU spins this long before each timed run, so the host's launches are queued ahead of it


class DeviceTimer:
    """Device time (µs) of a callable after ``warmup`` runs: before every timed run the L2 is flushed and the GPU
    spins for HOST_LEAD_US, so the events time queued device work, not the host's Python and launch overhead."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
        self.spin_cycles = int(HOST_LEAD_US * _spin_cycles_per_us())

    def samples(self, fn: Callable[[], Any], reps: int) -> list[float]:
        """The device time of each of ``reps`` timed runs, in µs. (Methods taking turns run by run were tried: on the
        H200 the order then leaked into the times, e.g. one 6 µs kernel 0.8 µs apart in fp16 and bf16.)"""
        for _ in range(self.warmup):
            fn()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))  # type: ignore[no-untyped-call]
                  for _ in range(reps)]
        for start, end in events:
            self.flush.zero_()
            torch.cuda._sleep(self.spin_cycles)  # type: ignore[no-untyped-call]
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        return [start.elapsed_time(end) * 1e3 for start, end in events]

    def __call__(self, fn: Callable[[], Any], reps: int) -> tuple[float, float]:
        """Median and P95 (µs) of ``reps`` timed runs."""
        return p50_p95(self.samples(fn, reps))


def p50_p95(samples: list[float]) -> tuple[float, float]:
    """Median and 95th percentile of a list of times."""
    times = sorted(samples)
    return times[len(times) // 2], times[min(len(times) - 1, int(0.95 * len(times)))]


def median_diff_ci(a: list[float], b: list[float], level: float = 0.95, resamples: int = 2000,
                   seed: int = 0) -> tuple[float, float]:
    """Bootstrap confidence interval of median(a) - median(b): each sample list resampled with replacement
    ``resamples`` times (seeded, so a table is reproducible from its samples)."""
    gen = torch.Generator().manual_seed(seed)
    ta, tb = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    ma = ta[torch.randint(len(a), (resamples, len(a)), generator=gen)].median(dim=1).values
    mb = tb[torch.randint(len(b), (resamples, len(b)), generator=gen)].median(dim=1).values
    lo, hi = torch.quantile(ma - mb, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)).tolist()
    return lo, hi


def _spin_cycles_per_us() -> float:
    """GPU clock cycles of torch.cuda._sleep per µs, measured once (the clock the spin counts varies by GPU)."""
    cycles = 1_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    torch.cuda._sleep(cycles)  # type: ignore[no-untyped-call]  # the first spin loads the kernel
    start.record()
    torch.cuda._sleep(cycles)  # type: ignore[no-untyped-call]
    end.record()
    torch.cuda.synchronize()
    return cycles / float(start.elapsed_time(end) * 1e3)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64."""
    return float(((out.double() - ref.double()).norm() / ref.double().norm()).item())
