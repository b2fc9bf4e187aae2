"""Time DeformConv2d's direct kernel against the launcher's other routes on a ladder of problem sizes (GPU).

    python bench/deform_conv_routes.py [--dtypes float32,float16,bfloat16] [--warmup 20] [--reps 100]

The launcher (torchtrt_ext_deform_conv2d, what the TensorRT plugins' enqueue and the eager op call) runs small
problems as one kernel (csrc/kernels/deform_conv2d_direct.cuh) and the others as transpose, sampling and GEMM, or on
an H100/H200 in fp16/bf16 as the fused implicit GEMM. TORCHTRT_EXT_DCN_DIRECT=1 forces the direct kernel, =0 the
others; the variable is read once per process, so each mode times the whole ladder in a subprocess of this script.
Cases: bench/deform_conv.py's case_inputs (3x3, padding 1, one offset group, offsets of sigma 2 pixels, mask, bias);
NCHW input (the plugin path) and channels-last input. Device time per call, L2 flushed before each timed run (the
timer of bench/_timing.py); median µs. The table gives each case's multiply-adds (output values x reduction rows),
both routes and their ratio: the launcher's default takes the direct kernel up to kDirectMaxMacs multiply-adds.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

# n, c_in, c_out, h, w: from the issue-30 small case upwards, and a few shapes of the same work spread otherwise
LADDER = [(1, 16, 16, 32, 32), (1, 32, 32, 40, 40), (1, 64, 64, 40, 40), (2, 64, 64, 40, 40), (1, 64, 64, 64, 64),
          (4, 64, 64, 40, 40), (1, 128, 128, 40, 40), (1, 256, 256, 20, 20), (1, 64, 64, 80, 80),
          (8, 64, 64, 40, 40), (2, 128, 128, 40, 40), (1, 256, 256, 40, 40), (4, 128, 128, 40, 40)]
DTYPES = ("float32", "float16", "bfloat16")


def _time_ladder(dtypes: list[str], warmup: int, reps: int) -> list[dict]:
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _timing import DeviceTimer  # bench/_timing.py
    from deform_conv import case_inputs  # bench/deform_conv.py
    from torchtrt_ext.ops._deform_conv2d_launcher import deform_conv2d_full

    timer, rows, one = DeviceTimer(warmup), [], (1, 1)
    for name in dtypes:
        dt = getattr(torch, name)
        for n, cin, cout, h, w in LADDER:
            x, off, msk, wt, b = case_inputs(n, cin, cout, h, w, dt)
            x_cl = x.contiguous(memory_format=torch.channels_last)
            row = {"dtype": name, "shape": [n, cin, cout, h, w], "macs": n * h * w * cout * cin * 9}
            for key, inp in (("nchw", x), ("cl", x_cl)):
                row[key] = timer(lambda inp=inp: deform_conv2d_full(inp, off, wt, b, msk, one, one, one, 1, 1), reps)[0]
            rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument("--mode", choices=["0", "1"], help=argparse.SUPPRESS)  # the subprocess of one mode
    args = parser.parse_args()
    dtypes = args.dtypes.split(",")
    if args.mode is not None:
        print(json.dumps(_time_ladder(dtypes, args.warmup, args.reps)))
        return
    by_mode = {}
    for mode in ("1", "0"):
        cmd = [sys.executable, __file__, "--mode", mode, "--dtypes", args.dtypes, "--warmup", str(args.warmup),
               "--reps", str(args.reps)]
        done = subprocess.run(cmd, env={**os.environ, "TORCHTRT_EXT_DCN_DIRECT": mode}, capture_output=True,
                              text=True, check=True)
        by_mode[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    print("| dtype | n×C→C×H×W | MACs (M) | direct NCHW | other NCHW | direct/other | direct CL | other CL | direct/other |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for d, o in zip(by_mode["1"], by_mode["0"]):
        n, cin, cout, h, w = d["shape"]
        row = {**d, "direct_nchw": d["nchw"], "other_nchw": o["nchw"], "direct_cl": d["cl"], "other_cl": o["cl"]}
        rows.append(row)
        print(f"| {d['dtype']} | {n}×{cin}→{cout}×{h}×{w} | {d['macs'] / 1e6:.0f} | {d['nchw']:.1f} | {o['nchw']:.1f} "
              f"| {d['nchw'] / o['nchw']:.2f} | {d['cl']:.1f} | {o['cl']:.1f} | {d['cl'] / o['cl']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
