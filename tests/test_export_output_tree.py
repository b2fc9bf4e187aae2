"""The output structure survives a build from an ONNX file (issue 33, item 6): export records the tree, with the type
of each dict key, in the model's metadata_props; ``build_engine(path)`` and ``torchtrt-ext build`` carry it into the
engine, so ``TRTModule`` returns the dict ``compile()`` would, int keys as ints."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
import torch

import torchtrt_ext
from tests.cli.models import make_int_keyed, make_nested
from torchtrt_ext.backend import Engine
from torchtrt_ext.export import output_tree
from torchtrt_ext.passes.onnx_util import OUTPUT_TREE_KEY
from torchtrt_ext.runtime import build_outputs

REPO = Path(__file__).resolve().parents[1]


def _leaves(engine: Engine) -> list[torch.Tensor]:
    return [torch.full((1,), float(i)) for i in range(len(engine.metadata.outputs))]


# the TorchScript tracer cannot trace a dict keyed by int, so the legacy exporter is checked on string keys
@pytest.mark.parametrize(("exporter", "make", "keys"), [("dynamo", make_int_keyed, [3, 4]),
                                                        ("legacy", make_nested, ["a", "b"])])
def test_export_records_the_tree_with_key_types(exporter: str, make: Callable[[], torch.nn.Module], keys: list,
                                                tmp_path: Path) -> None:
    model, x = make(), torch.randn(2, 3)
    torchtrt_ext.export_onnx(model, (x,), tmp_path / "m.onnx", exporter=exporter)
    props = {p.key: p.value for p in onnx.load(tmp_path / "m.onnx").metadata_props}
    tree = json.loads(props[OUTPUT_TREE_KEY])
    assert tree == output_tree(model(x)) and tree["keys"] == keys


def test_build_engine_from_the_file_returns_the_dict(rtx: str, tmp_path: Path) -> None:
    model, x = make_int_keyed(), torch.randn(2, 3)
    torchtrt_ext.export_onnx(model, (x,), tmp_path / "m.onnx")
    engine = torchtrt_ext.build_engine(tmp_path / "m.onnx", backend=rtx, progress=False)
    assert engine.metadata.output_tree == output_tree(model(x))
    rebuilt = build_outputs(engine.metadata.output_tree, _leaves(engine))
    assert list(rebuilt) == [3, 4] and isinstance(rebuilt[4], tuple) and float(rebuilt[4][1]) == 2.0


def test_a_tree_that_no_longer_fits_the_graph_is_not_carried(rtx: str, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    onnx_model = torchtrt_ext.export_onnx(make_int_keyed(), (torch.randn(2, 3),))
    del onnx_model.graph.output[2]  # an edited graph: the tree's three leaves, two outputs
    with caplog.at_level("WARNING", logger="torchtrt_ext"):
        engine = torchtrt_ext.build_engine(onnx_model, backend=rtx, progress=False)
    assert engine.metadata.output_tree is None and "3 leaves" in caplog.text


def test_the_cli_build_carries_the_tree(rtx: str, tmp_path: Path, isolated_cache: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    for args in (["export", "tests.cli.models:make_int_keyed", "--input-shape", "x:2x3", "-o", str(tmp_path / "m.onnx")],
                 ["build", str(tmp_path / "m.onnx"), "--backend", rtx, "-o", str(tmp_path / "m.engine")]):
        done = subprocess.run([sys.executable, "-m", "torchtrt_ext.cli", *args], cwd=REPO, env=env, text=True,
                              capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr
    tree = Engine.load(tmp_path / "m.engine").metadata.output_tree
    assert tree is not None and tree["keys"] == [3, 4]
