"""Integer inputs through the CLI (issue 33, item 3): an Embedding model's token ids are int64, in a range the user
sets (``--input-range ids:0,100``) or the documented default (``validate.DEFAULT_INT_RANGE``), in export, validate
and bench; and the library's own random inputs follow the same rule."""
from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
import torch

from torchtrt_ext import cli
from torchtrt_ext.validate import DEFAULT_INT_RANGE, random_input

MODEL = "tests.cli.models:make_embedding"


@pytest.fixture(scope="module")
def embedding_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("embedding") / "embedding.onnx"
    assert cli.main(["export", MODEL, "--input-shape", "ids:2x16", "--input-range", "ids:0,100", "-q",
                     "-o", str(path)]) == 0
    return path


def test_export_feeds_int64_ids_and_the_onnx_declares_them(embedding_onnx: Path) -> None:
    (ids,) = onnx.load(embedding_onnx).graph.input
    assert ids.type.tensor_type.elem_type == onnx.TensorProto.INT64


@pytest.mark.parametrize("ranges", [["--input-range", "ids:0,100"], []])
def test_validate_feeds_the_declared_dtype_in_range(embedding_onnx: Path, ranges: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    code = cli.main(["validate", MODEL, str(embedding_onnx), "--input-shape", "ids:2x16", *ranges, "--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert json.loads(out)["passed"]


def test_bench_feeds_the_declared_dtype(embedding_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("onnxruntime")
    code = cli.main(["bench", MODEL, str(embedding_onnx), "--input-shape", "ids:2x16", "--input-range", "ids:0,100",
                     "--warmup", "1", "--iters", "2", "-q", "--json"])
    assert code == 0, capsys.readouterr()


def test_an_input_range_outside_the_model_fails_in_the_model_not_in_the_cli(embedding_onnx: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["validate", MODEL, str(embedding_onnx), "--input-shape", "ids:2x16", "--input-range",
                     "ids:100,200"])
    assert code != 0 and "index out of range" in capsys.readouterr().err.lower()


@pytest.mark.parametrize("text", ["ids:5", "ids:3,1", "ids:a,b", "0,100"])
def test_bad_input_ranges_are_refused_with_the_form(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["export", MODEL, "--input-shape", "ids:2x16", "--input-range", text, "-o", "x.onnx"]) == 2
    assert "name:LOW,HIGH" in capsys.readouterr().err


def test_random_inputs_follow_the_dtype_and_range() -> None:
    g = torch.Generator().manual_seed(0)
    ids = random_input((1000,), torch.int64, torch.device("cpu"), g)
    low, high = DEFAULT_INT_RANGE
    assert ids.dtype == torch.int64 and int(ids.min()) == low and int(ids.max()) == high - 1
    ids = random_input((1000,), torch.int32, torch.device("cpu"), g, (10, 20))
    assert ids.dtype == torch.int32 and 10 <= int(ids.min()) and int(ids.max()) < 20
    x = random_input((1000,), torch.float16, torch.device("cpu"), g, (-2.0, 3.0))
    assert x.dtype == torch.float16 and -2.0 <= float(x.min()) and float(x.max()) <= 3.0


def test_bench_of_a_model_spec_alone_takes_the_type_and_values_from_the_input_range(
        capsys: pytest.CaptureFixture[str]) -> None:
    """No ONNX file declares a type: an integer --input-range makes the ids int64 in that range; a range past the
    embedding's 100 rows fails in the model (a failed row, exit 1)."""
    args = ["bench", MODEL, "--input-shape", "ids:2x16", "--warmup", "1", "--iters", "2", "-q", "--json"]
    code = cli.main([*args, "--input-range", "ids:90,100"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and [row["error"] for row in report["rows"]] == [""]
    code = cli.main([*args, "--input-range", "ids:100,200"])
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert code == 1 and "index out of range" in row["error"].lower()


def test_the_reference_declares_the_input_types_for_both(embedding_onnx: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Two ONNX files declaring different types: the reference's int64 ids are what both get, so onnxruntime refuses
    the candidate, which declares a float input (exit 2, naming it), not the reference."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["ids"], ["y"])], "float_ids",
                              [helper.make_tensor_value_info("ids", TensorProto.FLOAT, [2, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])])
    candidate = tmp_path / "float_ids.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), candidate)
    code = cli.main(["validate", str(embedding_onnx), str(candidate), "--input-shape", "ids:2x16", "--json"])
    error = json.loads(capsys.readouterr().out)["error"]
    assert code == 2 and error.startswith("onnxruntime failed to run float_ids.onnx: ") and "'int64'" in error
