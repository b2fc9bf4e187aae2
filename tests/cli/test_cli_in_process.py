"""The torchtrt-ext loop in-process (main() is what the console script exits with): export -> inspect -> build on
TensorRT-RTX, decomposed -> inspect the engine -> validate and bench on onnxruntime, each step's exit code, JSON
document and text. test_cli.py runs the same loop through subprocesses, which the mutation run
(scripts/mutation.sh cli) does not see."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchtrt_ext import cli
from torchtrt_ext.backend.engine import Engine
from torchtrt_ext.errors import ExitCode

MODEL = "tests.cli.models:make_head"
SHAPES = ["--min-shapes", "x:1x3x16x16", "--opt-shapes", "x:2x3x16x16", "--max-shapes", "x:4x3x16x16"]


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = cli.main([*args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


@pytest.fixture(scope="module")
def head_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnxruntime")
    path = tmp_path_factory.mktemp("cli") / "head.onnx"
    assert cli.main(["export", MODEL, "--input-shape", "x:2x3x16x16", "-o", str(path), "-q"]) == ExitCode.OK
    return path


@pytest.fixture(scope="module")
def head_engine(rtx: str, head_onnx: Path) -> Path:
    path = head_onnx.with_suffix(".engine")
    assert cli.main(["build", str(head_onnx), "-o", str(path), "--backend", rtx, "--plugins", "decompose", "-q",
                     *SHAPES]) == ExitCode.OK
    return path


def test_export_says_what_it_wrote(head_onnx: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "again.onnx"
    code, data = _json(capsys, "export", MODEL, "--input-shape", "x:2x3x16x16", "-o", str(path), "-q")
    assert code == ExitCode.OK and path.is_file()
    assert (data["output"], data["inputs"], data["outputs"], data["custom_nodes"]) == (
        str(path), ["x"], ["output"], ["L2Norm"])
    assert data["exporter"] in ("dynamo", "legacy") and data["nodes"] == 2
    assert cli.main(["export", MODEL, "--input-shape", "x:2x3x16x16", "-o", str(path), "-q", "--no-fuse"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"wrote {path}: ") and "inputs ['x'], outputs ['output']" in text


def test_inspect_an_onnx_file(rtx: str, head_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, found = _json(capsys, "inspect", str(head_onnx), "--backend", rtx)
    assert (found["kind"], found["backend"], found["nodes"]) == ("onnx", rtx, 2)
    assert found["native_ops"] == {"Conv": 1}
    assert code == (ExitCode.OK if found["ok"] else ExitCode.FAILED)
    assert cli.main(["inspect", str(head_onnx), "--backend", rtx]) == code
    assert "L2Norm" in capsys.readouterr().out  # the report's table names the custom node


def test_build_says_what_it_wrote(rtx: str, head_onnx: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "head.engine"
    code = cli.main(["build", str(head_onnx), "-o", str(path), "--backend", rtx, "--plugins", "decompose",
                     "--precision", "fp16", "--workspace", "64", *SHAPES, "--json"])
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert "[torchtrt-ext] building" not in captured.err  # --json: not the command's line; the build's progress
    assert "[torchtrt_ext] Building engine done" in captured.err  # (not -q) still, on stderr
    engine = Engine.load(path)
    assert code == ExitCode.OK and data["output"] == str(path) and data["bytes"] == len(engine.plan)
    assert data["custom_nodes"] == ["L2Norm"] and data["options"]["precision"] == "fp16"
    assert isinstance(data["seconds"], float) and 0 <= data["seconds"] < 600  # how long the build took
    assert data["seconds"] == round(data["seconds"], 2)  # in hundredths, like the text line
    assert engine.metadata.options.precision == "fp16" and engine.metadata.plugin_mode == "decompose"
    assert engine.metadata.options.workspace == 64 << 20  # --workspace is in MiB
    assert engine.metadata.profiles[0]["x"].max == (4, 3, 16, 16)
    assert cli.main(["build", str(head_onnx), "-o", str(path), "--backend", rtx, "--plugins", "decompose"]) == 0
    captured = capsys.readouterr()
    size = len(Engine.load(path).plan) / 1e6
    assert captured.out.startswith(f"wrote {path}: {size:.2f} MB, tensorrt_rtx ")
    assert "precision fp32, plugins decompose, 1 profile(s)" in captured.out
    assert f"[torchtrt-ext] building head.onnx with {rtx} (fp32, plugins decompose) ..." in captured.err
    assert "[torchtrt_ext] Building engine done" in captured.err  # the build's own progress
    assert cli.main(["build", str(head_onnx), "-o", str(path), "--backend", rtx, "--plugins", "decompose", "-q"]) == 0
    err = capsys.readouterr().err
    assert "[torchtrt-ext]" not in err and "Building engine" not in err  # -q: no progress at all


def test_inspect_an_engine_file(head_engine: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, meta = _json(capsys, "inspect", str(head_engine))
    assert code == ExitCode.OK and meta["kind"] == "engine" and meta["plugin_plan"]["mode"] == "decompose"
    assert meta["profiles"][0]["x"]["max"] == [4, 3, 16, 16]
    assert cli.main(["inspect", str(head_engine)]) == ExitCode.OK
    import torchtrt_ext

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("engine for tensorrt_rtx ")
    assert lines[1:3] == ["precision fp32, plugins decompose", f"built by torchtrt_ext {torchtrt_ext.__version__}"]
    rows = [line.split() for line in lines]
    assert ["io", "name", "dtype", "shape", "(-1:", "dynamic)"] in rows
    assert ["input", "x", "float32", "-1x3x16x16"] in rows and ["output", "output", "float32", "-1x8x16x16"] in rows
    assert any(line.startswith("profile 0: x: ") for line in lines)


def test_validate_passes_and_names_what_it_compared(head_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _json(capsys, "validate", MODEL, str(head_onnx), "--input-shape", "x:3x3x16x16", "--trials", "2")
    assert code == ExitCode.OK and report["passed"] and report["trials"] == 2
    assert (report["reference"], report["candidate"]) == (MODEL, str(head_onnx))
    assert report["outputs"][0]["ref_shape"] == [3, 8, 16, 16]
    code, report = _json(capsys, "validate", "tests.cli.models:make_other", str(head_onnx), "--input-shape",
                         "x:3x3x16x16")
    assert code == ExitCode.FAILED and not report["passed"]
    code, report = _json(capsys, "validate", "tests.cli.models:make_other", str(head_onnx), "--input-shape",
                         "x:3x3x16x16", "--atol", "100", "--rtol", "0.5", "--precision", "fp16")
    assert code == ExitCode.OK and (report["atol"], report["rtol"], report["precision"]) == (100, 0.5, "fp16")


def test_bench_times_every_target(head_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _json(capsys, "bench", MODEL, str(head_onnx), "--input-shape", "x:2x3x16x16", "--warmup", "1",
                         "--iters", "2", "--device", "cpu", "-q")
    assert code == ExitCode.OK and report["mode"] == "cpu" and (report["warmup"], report["iters"]) == (1, 2)
    assert [row["name"] for row in report["rows"]] == [MODEL, f"{head_onnx} (onnxruntime)"]
    assert report["batch_size"] == 2
    # an ONNX file alone: the shapes it declares
    from torchtrt_ext.validate import OnnxRuntimeModule

    ((name, shape, _),) = OnnxRuntimeModule(str(head_onnx)).input_specs()
    code, report = _json(capsys, "bench", str(head_onnx), "--warmup", "1", "--iters", "2", "--device", "cpu", "-q")
    assert code == ExitCode.OK and name == "x" and report["batch_size"] == shape[0]
    assert [row["name"] for row in report["rows"]] == [f"{head_onnx} (onnxruntime)"]


def test_inspect_exits_1_when_the_build_would_fail(rtx: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A node nothing serves (another domain's op, no plugin library for it): the report says the build would fail,
    and so does the exit code, for scripts."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="mycorp")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path = tmp_path / "foreign.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("mycorp", 1)]),
              path)
    code, found = _json(capsys, "inspect", str(path), "--backend", rtx)
    assert code == ExitCode.FAILED and found["kind"] == "onnx" and not found["ok"]


MATMUL = "tests.cli.models:make_matmul"


def test_named_input_shapes_go_to_the_forward_parameters_of_their_names(head_onnx: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """--input-shape names in another order than forward's parameters: each random tensor still goes to the parameter
    of its name (x @ w with swapped inputs would not multiply)."""
    code, report = _json(capsys, "validate", MATMUL, MATMUL, "--input-shape", "w:3x5", "--input-shape", "x:2x3")
    assert code == ExitCode.OK and report["outputs"][0]["ref_shape"] == [2, 5]
    code, report = _json(capsys, "bench", MATMUL, "--input-shape", "w:3x5,x:2x3", "--warmup", "1", "--iters", "2",
                         "--device", "cpu", "-q")
    assert code == ExitCode.OK and report["batch_size"] == 2 and not any(row["error"] for row in report["rows"])
    # an ONNX file alone given --input-shape: its own input order (no model spec to take parameter names from)
    code, report = _json(capsys, "bench", str(head_onnx), "--input-shape", "x:2x3x16x16", "--warmup", "1", "--iters",
                         "2", "--device", "cpu", "-q")
    assert code == ExitCode.OK and report["batch_size"] == 2


def test_dtype_sets_the_inputs_and_the_models_weights(capsys: pytest.CaptureFixture[str]) -> None:
    """--dtype float16: random inputs of that type and the model specs' weights moved to it (a float32 conv refuses
    float16 inputs)."""
    code, report = _json(capsys, "validate", MODEL, MODEL, "--input-shape", "x:1x3x16x16", "--dtype", "float16")
    assert code == ExitCode.OK and report["precision"] == "fp16"
    code, report = _json(capsys, "bench", MODEL, "--input-shape", "x:1x3x16x16", "--dtype", "float16", "--warmup",
                         "1", "--iters", "2", "--device", "cpu", "-q")
    assert code == ExitCode.OK and not any(row["error"] for row in report["rows"])


def test_torch_compile_adds_a_row_per_model_spec(head_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _json(capsys, "bench", MATMUL, "--input-shape", "x:2x3,w:3x5", "--torch-compile", "--warmup", "1",
                         "--iters", "2", "--device", "cpu", "-q")
    assert code == ExitCode.OK and [row["name"] for row in report["rows"]] == [MATMUL, f"{MATMUL} (torch.compile)"]
    assert not any(row["error"] for row in report["rows"])
    code, report = _json(capsys, "bench", str(head_onnx), "--torch-compile", "--warmup", "1", "--iters", "2",
                         "--device", "cpu", "-q")  # an ONNX file gets no torch.compile row
    assert code == ExitCode.OK and [row["name"] for row in report["rows"]] == [f"{head_onnx} (onnxruntime)"]


def test_the_seed_draws_the_later_trials(head_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--seed draws the inputs of the trials after the first: another seed finds another worst case, the same seed the
    same report, and no --seed is seed 0."""
    args = ("validate", "tests.cli.models:make_other", str(head_onnx), "--input-shape", "x:1x3x16x16", "--trials", "3")
    zero, one, again = (_json(capsys, *args, "--seed", seed)[1] for seed in ("0", "1", "1"))
    assert zero["outputs"][0]["max_abs_diff"] != one["outputs"][0]["max_abs_diff"] and one == again
    assert _json(capsys, *args)[1] == zero


def test_bench_prints_a_run_counter_unless_quiet(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from torchtrt_ext import _progress

    monkeypatch.setattr(_progress, "INTERVAL_S", 0.0)  # a line per step, not one per 2 s
    args = ["bench", MATMUL, "--input-shape", "x:2x3,w:3x5", "--warmup", "1", "--iters", "2", "--device", "cpu"]
    assert cli.main(args) == ExitCode.OK
    assert f"[torchtrt_ext] bench {MATMUL}: 3/3" in capsys.readouterr().err
    assert cli.main([*args, "-q"]) == ExitCode.OK
    assert "[torchtrt_ext]" not in capsys.readouterr().err


def test_bench_feeds_an_onnx_file_the_float_type_it_declares(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """No --input-shape: the inputs take the shapes and the types the ONNX file declares, float16 too (onnxruntime
    refuses a float32 array for a float16 input)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "half",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 4])])
    path = tmp_path / "half.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    code, report = _json(capsys, "bench", str(path), "--warmup", "1", "--iters", "2", "--device", "cpu", "-q")
    assert code == ExitCode.OK and report["batch_size"] == 2
    assert [row["error"] for row in report["rows"]] == [""]


def test_bench_float16_inputs_meet_a_float32_onnx_file(head_onnx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--input-shape with --dtype float16: the inputs are float16 for the model spec (moved to float16) although the
    ONNX file declares float32 (onnxruntime gets them widened)."""
    code, report = _json(capsys, "bench", MODEL, str(head_onnx), "--input-shape", "x:1x3x16x16", "--dtype", "float16",
                         "--warmup", "1", "--iters", "2", "--device", "cpu", "-q")
    assert code == ExitCode.OK and [row["error"] for row in report["rows"]] == ["", ""]


def test_bench_feeds_a_model_the_inputs_an_onnx_file_declares_by_position(head_onnx: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """No --input-shape: the ONNX file's declared inputs feed every target in the graph's order, so its input names
    need not be the model spec's forward parameter names."""
    import onnx

    model = onnx.load(head_onnx)
    model.graph.input[0].name = "images"
    for node in model.graph.node:
        node.input[:] = ["images" if name == "x" else name for name in node.input]
    path = tmp_path / "renamed.onnx"
    onnx.save(model, path)
    code, report = _json(capsys, "bench", MODEL, str(path), "--warmup", "1", "--iters", "2", "--device", "cpu", "-q")
    assert code == ExitCode.OK and [row["error"] for row in report["rows"]] == ["", ""]


def test_inspect_lists_the_plugin_libraries_it_was_given(rtx: str, head_onnx: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """--plugin-library: the doctor loads each library and the report names it (its creators, which are new to the
    registry only in a process that has not loaded them yet, are not asserted)."""
    from torchtrt_ext._native import plugin_library_path

    library = plugin_library_path()
    code, found = _json(capsys, "inspect", str(head_onnx), "--backend", rtx, "--plugin-library", str(library))
    assert code in (ExitCode.OK, ExitCode.FAILED)
    assert [entry["library"] for entry in found["plugin_libraries"]] == [library.name]
    code, found = _json(capsys, "inspect", str(head_onnx), "--backend", rtx)
    assert found["plugin_libraries"] == []


def test_inspect_says_when_an_engine_does_not_record_the_version_that_built_it(head_engine: Path) -> None:
    import dataclasses

    from torchtrt_ext.cli.inspect import engine_table

    meta = dataclasses.replace(Engine.load(head_engine).metadata, torchtrt_ext_version="")
    assert engine_table(meta).splitlines()[2] == "built by torchtrt_ext ?"


def test_export_flags_reach_the_exporter(head_onnx: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--exporter, --opset, --static and --no-functions shape the file written; by default the batch is dynamic and
    each custom node has its decomposition as an ONNX function. Without -q the export says it is running."""
    import onnx

    default = onnx.load(head_onnx)
    assert [f.name for f in default.functions] == ["L2Norm"]
    assert default.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # a named, dynamic batch
    path = tmp_path / "flags.onnx"
    code = cli.main(["export", MODEL, "--input-shape", "x:2x3x16x16", "-o", str(path), "--exporter", "legacy",
                     "--opset", "17", "--static", "--no-functions", "--json"])
    captured = capsys.readouterr()
    data, written = json.loads(captured.out), onnx.load(path)
    assert code == ExitCode.OK and data["exporter"] == "legacy" and isinstance(data["seconds"], float)
    assert {o.domain: o.version for o in written.opset_import}[""] == 17 and not written.functions
    assert [d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim] == [2, 3, 16, 16]
    assert f"[torchtrt_ext] exporting {MODEL} ..." in captured.err
    assert cli.main(["export", MODEL, "--input-shape", "x:2x3x16x16", "-o", str(path), "-q", "--exporter",
                     "legacy"]) == ExitCode.OK
    captured = capsys.readouterr()
    assert "custom nodes ['L2Norm']" in captured.out and "[torchtrt_ext]" not in captured.err
    code, data = _json(capsys, "export", MATMUL, "--input-shape", "x:2x3,w:3x5", "-o", str(path), "-q",
                       "--exporter", "legacy")
    assert code == ExitCode.OK and data["custom_nodes"] == [] and 0 <= data["seconds"] < 600
    assert data["seconds"] == round(data["seconds"], 2)  # in hundredths, like the text line
    assert cli.main(["export", MATMUL, "--input-shape", "x:2x3,w:3x5", "-o", str(path), "-q", "--exporter",
                     "legacy"]) == ExitCode.OK
    assert ", custom nodes none, " in capsys.readouterr().out


def test_export_never_writes_over_the_file_of_the_models_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """-o naming the file the model spec's module comes from is refused (exit 2) and the file left alone: a module
    imported by name, and a file path holding a colon; a module without a file (made in memory) exports."""
    import sys
    import types

    source = "import torch\n\n\ndef make():\n    return torch.nn.ReLU()\n"
    folder = tmp_path / "run:3"
    folder.mkdir()
    module = folder / "cli_spec_file_model.py"
    module.write_text(source)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "cli_spec_file_model", raising=False)  # the import below is undone after
    for spec in ("cli_spec_file_model:make", f"{module}:make"):
        assert cli.main(["export", spec, "--input-shape", "input:2x3", "-o", str(module), "-q"]) == ExitCode.USAGE
        assert f"-o {module} is this command's input" in capsys.readouterr().err and module.read_text() == source
    in_memory = types.ModuleType("cli_in_memory_model")
    in_memory.make = lambda: __import__("torch").nn.ReLU()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cli_in_memory_model", in_memory)
    assert cli.main(["export", "cli_in_memory_model:make", "--input-shape", "input:2x3", "-o", str(tmp_path / "m.onnx"),
                     "-q", "--exporter", "legacy"]) == ExitCode.OK
