"""``torchtrt-ext export`` writes each custom op's function (also for the L2Norm nodes its fusion makes) and
``--no-functions`` the custom nodes alone."""
from __future__ import annotations

from pathlib import Path

import onnx

from tests.cli.test_cli import MODEL, _run


def test_export_writes_the_functions_and_no_functions_leaves_them_out(tmp_path: Path) -> None:
    written = {}
    for flags in ((), ("--no-functions",)):
        path = tmp_path / f"m{len(flags)}.onnx"
        done = _run("export", MODEL, "--input-shape", "x:2x3x16x16", "-o", str(path), "-q", *flags)
        assert done.returncode == 0, done.stderr
        written[flags] = onnx.load(str(path))
    assert [(f.domain, f.name) for f in written[()].functions] == [("torchtrt_ext", "L2Norm")]
    assert not written[("--no-functions",)].functions
    for model in written.values():
        assert [n.op_type for n in model.graph.node if n.domain == "torchtrt_ext"] == ["L2Norm"]
