"""The TensorRT/TensorRT-RTX adapter (torchtrt_ext.backend.adapter), against TensorRT-RTX's real bindings."""
from __future__ import annotations

import gc
import weakref
from typing import Any

import pytest

from torchtrt_ext.backend import adapter
from torchtrt_ext.backend.adapter import load_backend


def test_the_logger_given_to_init_libnvinfer_plugins_lives_on(rtx: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The binding passes the logger to libnvinfer_plugin as a raw pointer and keeps no reference (NVIDIA/TensorRT
    python/src/infer/pyPlugin.cpp: ``m.def("init_libnvinfer_plugins", &initLibNvInferPlugins, "logger"_a, ...)``,
    no keep_alive), and the library logs through it later (EfficientNMS_TRT refusing an attribute): it must outlive
    the call. TensorRT-RTX's real function, wrapped to see the logger."""
    api = load_backend(rtx)
    real = api.trt.init_libnvinfer_plugins
    given: list[weakref.ref[Any]] = []

    def recording(logger: Any, namespace: str) -> bool:
        given.append(weakref.ref(logger))
        return bool(real(logger, namespace))

    monkeypatch.setattr(api.trt, "init_libnvinfer_plugins", recording)
    adapter._tensorrt_plugins_registered.cache_clear()
    try:
        api.tensorrt_plugin_creator("EfficientNMS_TRT", "1", "")
    finally:
        adapter._tensorrt_plugins_registered.cache_clear()
    gc.collect()
    assert len(given) == 1 and given[0]() is not None
