"""Inputs a user gets wrong get the project's error naming the input and the remedy, not a bare Python error
(issue 33, item 14)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torchtrt_ext
from torchtrt_ext.backend.engine import Engine
from torchtrt_ext.errors import FileWriteError, InvalidAttributeError, InvalidInputError
from torchtrt_ext.passes.onnx_util import read_onnx

REPO = Path(__file__).resolve().parents[1]


def test_engine_load_of_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=rf"engine file {tmp_path} is a directory.*Remedy: pass the engine "
                                                r"file"):
        Engine.load(tmp_path)


def test_onnx_model_given_as_a_directory(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=rf"ONNX file {tmp_path} is a directory, not a file.*Remedy: pass "
                                                r"the \.onnx file"):
        read_onnx(tmp_path)


def test_float32_remedy_names_only_values_the_attribute_takes() -> None:
    with pytest.raises(InvalidAttributeError, match=r"eps=1e-50 does not survive float32") as info:
        torchtrt_ext.ops.l2norm(torch.randn(2, 3), dim=1, eps=1e-50)
    assert "(or 0)" not in str(info.value)


@pytest.mark.parametrize(("kwargs", "name"), [({"kernel_size": 3.5}, "kernel_size"), ({"stride": (1, 2.0)}, "stride"),
                                              ({"padding": "same"}, "padding"), ({"kernel_size": (3,)}, "kernel_size")])
def test_deform_conv2d_sizes_that_are_not_int_pairs(kwargs: dict, name: str) -> None:
    args = {"kernel_size": 3, **kwargs}
    with pytest.raises(InvalidAttributeError, match=rf"DeformConv2d: {name}=.* is not an int or a pair of ints.*"
                                                    r"Remedy: pass"):
        torchtrt_ext.nn.DeformConv2d(4, 6, **args)


def test_deform_conv2d_on_an_empty_batch_returns_an_empty_batch() -> None:
    """As torch.nn.Conv2d does: a batch of 0 gives an output of batch 0, not a reshape error."""
    layer = torchtrt_ext.nn.DeformConv2d(4, 6, 3, padding=1)
    x, offset, mask = torch.randn(0, 4, 8, 8), torch.randn(0, 18, 8, 8), torch.rand(0, 9, 8, 8)
    assert layer(x, offset, mask).shape == (0, 6, 8, 8)
    assert layer(x, offset).shape == (0, 6, 8, 8)


def test_a_failed_write_names_the_file(tmp_path: Path) -> None:
    """A write the file system refuses (here the file size limit, as a full disk does) names the file and says what
    to do, instead of a bare OSError; it is still an OSError for callers that catch one."""
    target = tmp_path / "model.onnx"
    script = textwrap.dedent(f"""
        import resource, signal, torch, torchtrt_ext
        from tests.test_files import Tiny
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1000, resource.RLIM_INFINITY))
        try:
            torchtrt_ext.export_onnx(Tiny().eval(), (torch.randn(1, 64),), {str(target)!r})
        except OSError as exc:
            print(type(exc).__name__, exc)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"{FileWriteError.__name__} could not write {target}: "), done.stdout
    assert "File too large" in done.stdout and "Remedy: free space" in done.stdout, done.stdout
    assert not target.exists()
