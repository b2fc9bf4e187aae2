"""Shared test configuration: markers that skip, with the reason, where the machine lacks a GPU or TensorRT."""
from __future__ import annotations

import importlib.util

import pytest


def _gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    return None if torch.cuda.is_available() else "no CUDA GPU on this machine (torch.cuda.is_available() is False)"


def _tensorrt_reason() -> str | None:
    if importlib.util.find_spec("tensorrt") is None:
        return "full TensorRT is not installed (pip install 'torchtrt_ext[trt]' on a machine that can fetch it)"
    try:
        import tensorrt  # noqa: F401
    except Exception as exc:  # the bindings install but cannot load without the libraries
        return f"tensorrt does not import here: {exc}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reasons = {"gpu": _gpu_reason, "tensorrt": _tensorrt_reason}
    cache: dict[str, str | None] = {}
    for item in items:
        for name, probe in reasons.items():
            if item.get_closest_marker(name) is None:
                continue
            if name not in cache:
                cache[name] = probe()
            if cache[name]:
                item.add_marker(pytest.mark.skip(reason=cache[name]))
