"""A cache hit proves it belongs to its key (issue 33, item 5): the model key (``cache.cache_keys``: model, options,
output tree, torchtrt_ext version) is recorded in the engine's metadata and compared on every hit, so a valid engine of
another model placed under the key is a logged miss and a rebuild, never returned."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import onnx
import pytest

from torchtrt_ext.backend import Engine
from torchtrt_ext.backend.options import BuildOptions
from torchtrt_ext.cache import cache_keys, cached_build_engine


def test_an_engine_of_another_model_under_the_key_is_rebuilt(rtx: str, conv_onnx: onnx.ModelProto,
                                                             l2norm_onnx: onnx.ModelProto, isolated_cache: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    conv = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    (conv_path,) = isolated_cache.glob("*.engine")
    other = cached_build_engine(l2norm_onnx, backend=rtx, plugins="decompose", progress=False)
    (other_path,) = set(isolated_cache.glob("*.engine")) - {conv_path}
    shutil.copyfile(other_path, conv_path)  # a valid engine file, of another model, under conv's key
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        again = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    assert again.plan != other.plan and again.metadata.plugin_mode == conv.metadata.plugin_mode
    assert again.metadata.model_key == conv.metadata.model_key != other.metadata.model_key
    assert "belongs to another model or other build options" in caplog.text and conv_path.name in caplog.text
    assert Engine.load(conv_path).metadata.model_key == conv.metadata.model_key  # the entry is replaced


def test_the_recorded_key_is_the_cache_key(rtx: str, conv_onnx: onnx.ModelProto, isolated_cache: Path) -> None:
    engine = cached_build_engine(conv_onnx, backend=rtx, progress=False)
    model_key, _ = cache_keys(conv_onnx, BuildOptions.of(backend=rtx), engine.metadata.target)
    assert engine.metadata.model_key == model_key
    assert Engine.load(next(isolated_cache.glob("*.engine"))).metadata.model_key == model_key
