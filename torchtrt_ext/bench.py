"""``benchmark``: time several candidates (eager, ``torch.compile``, the engine, onnxruntime) on the same inputs, in one
run, and report P50, P95, mean and throughput side by side, each row with its speed relative to the first.

Timing modes (the report says which one ran):

- ``cuda`` (default when an input is a CUDA tensor): a pair of CUDA events on the current stream around **every**
  run; the events are read after all runs, so the timed loop never waits on the host. This times the GPU work
  of each run, which host timers mis-measure for asynchronous work (docs/design.md#validation-and-timing).
- ``cpu`` (inputs on the CPU, or ``device="cpu"``): ``time.perf_counter_ns`` around every run. Labelled
  "host timer" in the report; when CUDA is in use it synchronizes after each run so the time is at least complete.

Warm-up runs (default 50) are not timed; they absorb ``torch.compile`` compilation, cuDNN autotuning and lazy
initialization. A candidate that raises is reported as failed (with the reason) and the others still run.
"""
from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from torchtrt_ext._progress import Counter
from torchtrt_ext.errors import InvalidInputError, failure
from torchtrt_ext.validate import as_callable, format_table

@dataclasses.dataclass(frozen=True)
class BenchmarkRow:
    """One candidate's timings in milliseconds (None when it failed)."""

    name: str
    p50_ms: float | None
    p95_ms: float | None
    mean_ms: float | None
    min_ms: float | None
    throughput: float | None  # items per second at the P50 time (items = batch_size per run)
    speedup: float | None  # first row's P50 / this row's P50 (>1: faster than the first row)
    iters: int
    group: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class BenchmarkReport:
    """The rows of one ``benchmark`` call (or several, merged with ``concat``), and how they were timed."""

    rows: tuple[BenchmarkRow, ...]
    mode: str  # "cuda" or "cpu"
    warmup: int
    iters: int
    batch_size: int
    device: str

    @property
    def failed(self) -> list[str]:
        return [r.name for r in self.rows if not r.ok]

    @property
    def timer(self) -> str:
        return ("CUDA events around every run" if self.mode == "cuda" else
                "host timer (CPU mode: time.perf_counter around every run)")

    def row(self, name: str, group: str | None = None) -> BenchmarkRow:
        for r in self.rows:
            if r.name == name and (group is None or r.group == group):
                return r
        raise KeyError(name)

    @classmethod
    def concat(cls, reports: Sequence[BenchmarkReport]) -> BenchmarkReport:
        """One report holding every row of ``reports`` (give each its ``group`` first). Settings of the first."""
        if not reports:
            raise InvalidInputError(failure("BenchmarkReport.concat got no reports", "one or more", "pass a list"))
        first = reports[0]
        return cls(rows=tuple(r for rep in reports for r in rep.rows), mode=first.mode, warmup=first.warmup,
                   iters=first.iters, batch_size=first.batch_size, device=first.device)

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "timer": self.timer, "device": self.device, "warmup": self.warmup,
                "iters": self.iters, "batch_size": self.batch_size, "rows": [r.to_json() for r in self.rows]}

    def to_table(self) -> str:
        grouped = any(r.group for r in self.rows)
        first = self.rows[0].name if self.rows else "-"
        head = (f"benchmark on {self.device}: {self.timer}; {self.warmup} warm-up + {self.iters} timed runs per row; "
                f"speedup = P50 of the first row{'' if grouped else f' ({first})'}"
                f"{' of each group' if grouped else ''} / P50")
        headers = (["group"] if grouped else []) + ["candidate", "P50 ms", "P95 ms", "mean ms", "items/s", "speedup"]
        rows = []
        for r in self.rows:
            cells = [r.name, _ms(r.p50_ms), _ms(r.p95_ms), _ms(r.mean_ms),
                     "-" if r.throughput is None else f"{r.throughput:,.0f}",
                     "-" if r.speedup is None else f"{r.speedup:.2f}x"]
            if r.error:
                cells[1:] = [f"FAILED: {r.error}", "", "", "", ""]
            rows.append(([r.group] if grouped else []) + cells)
        return head + "\n" + format_table(headers, rows)

    def __str__(self) -> str:
        return self.to_table()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}" if value < 1 else f"{value:.3f}"


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(samples)
    if not ordered:
        raise InvalidInputError(failure("percentile of no samples", "at least one sample", "run iters >= 1"))
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _resolve_mode(device: Any, inputs: tuple[Any, ...]) -> tuple[str, str]:
    if device is None:
        cuda = next((t.device for t in inputs if isinstance(t, torch.Tensor) and t.is_cuda), None)
        device = cuda if cuda is not None else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidInputError(failure(f"device={device!r} is not a device", "'cuda', 'cuda:0' or 'cpu'",
                                        "pass device='cuda' or 'cpu'")) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InvalidInputError(failure("benchmark(device='cuda') on a machine without a CUDA GPU",
                                            "a CUDA device", "pass device='cpu' for host-timer CPU mode"))
        name = torch.cuda.get_device_name(dev)
        return "cuda", f"{dev} ({name})"
    if dev.type != "cpu":
        raise InvalidInputError(failure(f"device={device!r}", "'cuda' or 'cpu'", "pass device='cuda' or 'cpu'"))
    return "cpu", "cpu"


def _time_cuda(fn: Callable[[], Any], iters: int, device: torch.device | None) -> list[float]:
    stream = torch.cuda.current_stream(device)
    event = torch.cuda.Event
    pairs = [(event(enable_timing=True), event(enable_timing=True))  # type: ignore[no-untyped-call]
             for _ in range(iters)]
    for start, end in pairs:
        start.record(stream)
        fn()
        end.record(stream)
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) for start, end in pairs]


def _time_host(fn: Callable[[], Any], iters: int, sync: bool) -> list[float]:
    samples = []
    for _ in range(iters):
        begin = time.perf_counter_ns()
        fn()
        if sync:
            torch.cuda.synchronize()
        samples.append((time.perf_counter_ns() - begin) / 1e6)
    return samples


def _chunks(iters: int, parts: int = 10) -> list[int]:
    """``iters`` split into at most ``parts`` near-equal chunks."""
    return [iters // parts + (1 if i < iters % parts else 0) for i in range(min(iters, parts))]


def _batch_size(inputs: tuple[Any, ...]) -> int:
    first = next((t for t in inputs if isinstance(t, torch.Tensor)), None)
    return int(first.shape[0]) if first is not None and first.dim() > 0 else 1


def benchmark(candidates: Mapping[str, Any], inputs: Any, *, warmup: int = 50, iters: int = 200,
              device: Any = None, batch_size: int | None = None, group: str = "",
              progress: bool = True) -> BenchmarkReport:
    """Time every candidate on ``inputs`` and return a report (rows in the order of ``candidates``).

    Args:
        candidates: name -> a callable on ``*inputs`` (module, compiled module, TRTModule), or an ONNX model /
            .onnx path (run by onnxruntime on the CPU).
        inputs: a tensor or a tuple of tensors passed to every candidate as positional arguments.
        warmup: untimed runs per candidate before timing (>= 0). Default: 50.
        iters: timed runs per candidate (>= 1). Default: 200.
        device: "cuda[:i]" (CUDA events) or "cpu" (host timer). Default: None ("cuda" when an input is on a GPU).
        batch_size: items per run for the throughput column. Default: None (dim 0 of the first input).
        group: label put on every row (to merge several reports into one table). Default: "".
        progress: print a run counter per candidate on stderr. Default: True.

    Raises:
        InvalidInputError: empty candidates, bad counts, or a CUDA device on a machine without one.
    """
    if not candidates:
        raise InvalidInputError(failure("benchmark got no candidates", "a dict name -> callable",
                                        "pass {'eager': model, 'compiled': compiled}"))
    if not (isinstance(warmup, int) and warmup >= 0 and isinstance(iters, int) and iters >= 1):
        raise InvalidInputError(failure(f"warmup={warmup!r}, iters={iters!r}", "warmup >= 0 and iters >= 1 (ints)",
                                        "use the defaults warmup=50, iters=200"))
    args = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    mode, label = _resolve_mode(device, args)
    dev = torch.device(device) if device is not None and mode == "cuda" else None
    sync = mode == "cpu" and torch.cuda.is_available() and torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
    items = batch_size if batch_size is not None else _batch_size(args)
    rows: list[BenchmarkRow] = []
    first_p50: float | None = None
    for name, candidate in candidates.items():
        try:
            fn = as_callable(candidate, isolated=False)  # timed: no pipe to another process in the loop

            def run(fn: Callable[..., Any] = fn) -> Any:
                return fn(*args)

            counter = Counter(f"bench {name}", warmup + iters, enabled=progress)
            with torch.no_grad():
                for _ in range(warmup):
                    run()
                    counter.step()
                if mode == "cuda":
                    torch.cuda.synchronize(dev)
                samples = []
                for chunk in _chunks(iters):  # the counter moves between chunks, never between two timing events
                    samples += _time_cuda(run, chunk, dev) if mode == "cuda" else _time_host(run, chunk, sync)
                    counter.step(chunk)
        except Exception as exc:  # noqa: BLE001 - a failing candidate is a row, not the end of the run
            reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
            rows.append(BenchmarkRow(name, None, None, None, None, None, None, 0, group, reason))
            continue
        p50 = percentile(samples, 50)
        if first_p50 is None:  # the first row, or the first that ran when it failed
            first_p50 = p50
        rows.append(BenchmarkRow(
            name=name, p50_ms=p50, p95_ms=percentile(samples, 95), mean_ms=sum(samples) / len(samples),
            min_ms=min(samples), throughput=items / (p50 / 1e3) if p50 > 0 else None,
            speedup=first_p50 / p50 if first_p50 is not None and p50 > 0 else None, iters=iters, group=group))
    return BenchmarkReport(rows=tuple(rows), mode=mode, warmup=warmup, iters=iters, batch_size=items, device=label)
