"""Where a fused DeformConv2d tile's time goes, block by block: the fused kernel's per-block phase stamps.

    TORCHTRT_EXT_DCN_TRACE=1 TORCHTRT_EXT_CUDA_ARCHS=90 python setup.py build_ext --inplace   # the diagnostic build
    python bench/deform_conv_trace.py [--cases resnet_stage,fpn_level,waves:1x64] [--dtype float16] [--cold]

Needs the diagnostic build (setup.py's TORCHTRT_EXT_DCN_TRACE=1, csrc/kernels/deform_conv2d_trace.cuh): there the
fused kernels (fusedKernel and fusedWsKernel for fp16/bf16, fusedPairKernel for float32; H100/H200) have thread 0 of
each block stamp its clock at each phase boundary (fusedWsKernel's thread 0 is a consumer). Time nothing else there.
Per case, one call of the launcher on a channels-last input after warm-up (with --cold, after a 256 MB write that
evicts L2), then over the blocks the median, p10, p90 and max µs of each phase (clock64 at the blocks' median rate,
from their globaltimer spans), the loop's µs per reduction block, the gaps between consecutive blocks on a
multiprocessor and the spread of the multiprocessors' end times: the per-tile cost that deform_conv_waves.py's
intercept sums up, taken apart. Cases: deform_conv.CASES by name, and waves:<w>x<cin> for deform_conv_waves.py's
shapes (4w x cin -> 256 x 64 x 66: exactly w waves of 128-pixel tiles, 9 reduction blocks per 64 input channels).
"""
from __future__ import annotations

import argparse
import ctypes
import statistics

import torch

# Slots of a block's row (csrc/kernels/deform_conv2d_trace.cuh's TraceSlot; tests/test_bench_scripts.py checks them).
SLOTS = {"start_ns": 0, "end_ns": 1, "sm": 2, "reduction_blocks": 3, "start": 4, "table_filled": 5, "waited": 6,
         "loop_start": 7, "first_issued": 8, "middle": 9, "loop_end": 10, "end": 11}
ROW_SLOTS, ROWS = 16, 4096  # kTraceSlots, kTraceBlocks
# (phase, from slot, to slot): clock64 stamps of thread 0
PHASES = [("first corner table", "start", "table_filled"), ("wait for the kernels before", "table_filled", "waited"),
          ("pipeline fill (blocks 0, 1 read)", "waited", "loop_start"),
          ("first wgmma issued", "loop_start", "first_issued"), ("loop, first half", "loop_start", "middle"),
          ("loop, second half", "middle", "loop_end"), ("output stored", "loop_end", "end"),
          ("whole block", "start", "end")]


def _pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile q (0 <= q < 1) of values."""
    return sorted(values)[int(q * len(values))]


def summarize(rows: list[list[int]]) -> dict:
    """The phase statistics of one launch's rows (rows with start_ns 0 were not written and are left out)."""
    rows = [r for r in rows if r[SLOTS["start_ns"]] != 0]
    if not rows:
        raise ValueError("no rows written: no fused-kernel block ran")
    at = {name: [r[slot] for r in rows] for name, slot in SLOTS.items()}
    timed = [r for r in rows if r[SLOTS["end_ns"]] > r[SLOTS["start_ns"]]]  # a coarse globaltimer may not advance
    if not timed:
        raise ValueError("no block's globaltimer advanced: its clock rate is unknown")
    rate = statistics.median((r[SLOTS["end"]] - r[SLOTS["start"]]) / (r[SLOTS["end_ns"]] - r[SLOTS["start_ns"]])
                             for r in timed)  # clock cycles per ns

    def us(a: str, b: str) -> list[float]:
        return [(y - x) / rate / 1e3 for x, y in zip(at[a], at[b])]

    phases = {}
    for name, a, b in PHASES:
        v = us(a, b)
        phases[name] = (statistics.median(v), _pct(v, 0.1), _pct(v, 0.9), max(v))
    per_block = [t / k for t, k in zip(us("loop_start", "loop_end"), at["reduction_blocks"])]
    by_sm: dict[int, list[list[int]]] = {}
    for r in rows:
        by_sm.setdefault(r[SLOTS["sm"]], []).append(r)
    t0 = min(at["start_ns"])
    gaps, ends = [], []
    for blocks in by_sm.values():
        blocks.sort()  # by start_ns, a row's first slot
        gaps += [(b[SLOTS["start_ns"]] - a[SLOTS["end_ns"]]) / 1e3 for a, b in zip(blocks, blocks[1:])]
        ends.append((blocks[-1][SLOTS["end_ns"]] - t0) / 1e3)
    return {"blocks": len(rows), "reduction_blocks": (min(at["reduction_blocks"]), max(at["reduction_blocks"])),
            "span_us": (max(at["end_ns"]) - t0) / 1e3, "ghz": rate, "phases": phases,
            "per_block_us": (statistics.median(per_block), _pct(per_block, 0.1), _pct(per_block, 0.9)),
            "sms": len(by_sm), "blocks_per_sm": sorted({len(b) for b in by_sm.values()}),
            "sm_gap_us": (statistics.median(gaps), max(gaps)) if gaps else None,
            "sm_end_us": (min(ends), statistics.median(ends), max(ends))}


def report(name: str, s: dict) -> str:
    """summarize()'s statistics as a markdown section."""
    kmin, kmax = s["reduction_blocks"]
    lines = [f"## {name}: {s['blocks']} blocks on {s['sms']} multiprocessors ({'/'.join(map(str, s['blocks_per_sm']))}"
             f" a multiprocessor), {kmin}-{kmax} reduction blocks a block, span {s['span_us']:.1f} µs, clock "
             f"{s['ghz']:.3f} GHz", "", "| phase | median µs | p10 | p90 | max |", "|---|---|---|---|---|"]
    lines += [f"| {p} | {a:.2f} | {b:.2f} | {c:.2f} | {d:.2f} |" for p, (a, b, c, d) in s["phases"].items()]
    lines += ["", "loop µs per reduction block: median {:.3f}, p10 {:.3f}, p90 {:.3f}".format(*s["per_block_us"])]
    if s["sm_gap_us"]:
        lines.append("gap between consecutive blocks on a multiprocessor µs: median {:.2f}, max {:.2f}".format(
            *s["sm_gap_us"]))
    lines.append("multiprocessors' last block ends µs after the first start: min {:.1f}, median {:.1f}, max {:.1f}"
                 .format(*s["sm_end_us"]))
    return "\n".join(lines) + "\n"


def case_shape(case: str) -> tuple[int, int, int, int, int]:
    """(n, cin, cout, h, w) of a deform_conv.CASES name or of waves:<w>x<cin>."""
    from deform_conv import CASES
    from deform_conv_waves import wave_shape

    if case.startswith("waves:"):
        waves, cin = (int(v) for v in case.removeprefix("waves:").split("x"))
        return wave_shape(waves, cin)
    shapes = {c[0]: c[1:] for c in CASES}
    if case not in shapes:
        raise SystemExit(f"unknown case {case!r}: one of {', '.join(shapes)} or waves:<w>x<cin>")
    return shapes[case]


def trace_case(trace: object, case: str, dtype: torch.dtype, cold: bool) -> list[list[int]]:
    """The rows of one launcher call of `case` on a channels-last input (after 5 untraced calls)."""
    from deform_conv_waves import warm_channels_last_call

    call = warm_channels_last_call(case_shape(case), dtype)
    buffer = (ctypes.c_uint64 * (ROWS * ROW_SLOTS))()
    if trace(None, 0) != 0:  # type: ignore[operator]
        raise SystemExit("torchtrt_ext_deform_conv2d_trace failed to clear the rows")
    if cold:
        torch.empty(256 << 20, dtype=torch.uint8, device="cuda").zero_()
    call()
    torch.cuda.synchronize()
    if trace(ctypes.byref(buffer), ctypes.sizeof(buffer)) != 0:  # type: ignore[operator]
        raise SystemExit("torchtrt_ext_deform_conv2d_trace failed to copy the rows")
    return [list(buffer[i * ROW_SLOTS:(i + 1) * ROW_SLOTS]) for i in range(ROWS)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="resnet_stage,det_head,fpn_level,waves:1x64,waves:1x512,waves:2x256")
    parser.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    parser.add_argument("--cold", action="store_true", help="evict L2 before the traced call")
    args = parser.parse_args()
    from torchtrt_ext._native import kernels_library

    try:
        trace = kernels_library().torchtrt_ext_deform_conv2d_trace
    except AttributeError:
        raise SystemExit("this libtorchtrt_ext_kernels.so is not the diagnostic build: rebuild it with "
                         "TORCHTRT_EXT_DCN_TRACE=1 TORCHTRT_EXT_CUDA_ARCHS=90 python setup.py build_ext "
                         "--inplace") from None
    trace.argtypes, trace.restype = [ctypes.c_void_p, ctypes.c_int64], ctypes.c_int32
    print(f"# {torch.cuda.get_device_name(0)}, {args.dtype}, channels-last input, {'cold' if args.cold else 'warm'} L2")
    for case in args.cases.split(","):
        rows = trace_case(trace, case, getattr(torch, args.dtype), args.cold)
        try:
            print(report(case, summarize(rows)), flush=True)
        except ValueError:
            print(f"## {case}: no fused-kernel block ran (another route: TORCHTRT_EXT_DCN_FUSED=1 takes the fused "
                  "kernels wherever they apply)\n", flush=True)


if __name__ == "__main__":
    main()
