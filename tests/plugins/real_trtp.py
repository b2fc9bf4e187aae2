"""The real ``tensorrt.plugin`` package, run on TensorRT-RTX's Python bindings, for the Python-plugin tests.

``tensorrt.plugin`` is pure Python. It ships in NVIDIA's TensorRT bindings wheel, whose native module cannot load
here (no TensorRT libraries); ``scripts/setup_env.sh`` unpacks that wheel of each release in ``RELEASES`` into
``.deps/`` (``folder``). The package imports ``tensorrt`` for the binding classes it builds on (``DataType``,
``PluginField``, ``IPluginV3``, ``IPluginCreatorV3Quick``, ``PluginTensorDesc``, ...); TensorRT-RTX's bindings have
the same classes, so ``tensorrt`` is served here by a module holding TensorRT-RTX's, plus one name RTX lacks:
``ISymExpr``, which the package only subclasses for ahead-of-time plugins, replaced by a class that refuses to be
instantiated.

What cannot run here is the C++ side of a build: the IExprBuilder TensorRT hands to ``get_output_shapes`` exists only
inside a build, and TensorRT-RTX's ONNX parser refuses ``tensorrt.plugin`` creators ("TensorRT-RTX imports IPluginV3
plugins registered with an IPluginCreatorV3One creator only"). ``ExprBuilder`` below is a stand-in for it, used with
the real ``ShapeExpr``; it offers only IExprBuilder's two calls and folds constants as TensorRT does.
"""
from __future__ import annotations

import functools
import importlib
import operator
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
# One tensorrt.plugin release per minor version pip offers from 10.13 (keep in step with scripts/setup_env.sh);
# before 11.3 create_plugin reads a scalar attribute as int(array) / float(array), which numpy >= 2.4 refuses.
RELEASES = ("10.13.3.9.post1", "10.14.1.48.post1", "10.15.1.29", "10.16.1.11", "11.0.0.114", "11.1.0.106",
            "11.2.1.2", "11.3.0.99", "11.4.0.106")
TRTP_VERSION = RELEASES[-1]  # the one the tests that do not run per release use


def folder(version: str) -> Path:
    """Where scripts/setup_env.sh unpacks the bindings wheel of ``version``."""
    return ROOT / ".deps" / f"tensorrt-plugin-{version}" / "tensorrt_bindings"


class _NoISymExpr:
    """TensorRT-RTX has no ISymExpr (symbolic attributes of ahead-of-time plugins, unused here)."""

    def __init__(self, *args: Any) -> None:
        raise NotImplementedError("ISymExpr is not in TensorRT-RTX's bindings")


@functools.lru_cache(maxsize=None)
def _load(version: str) -> dict[str, types.ModuleType] | str:
    """The modules of ``tensorrt`` + ``tensorrt.plugin`` of ``version``, imported once, or why they cannot be."""
    package = folder(version)
    if not (package / "plugin" / "__init__.py").is_file():
        return (f"the real tensorrt.plugin package is not unpacked at {package.parent} (scripts/setup_env.sh does "
                f"it: pip install --no-deps --target ... tensorrt-cu13-bindings=={version})")
    try:
        rtx = importlib.import_module("tensorrt_rtx")
    except ImportError as exc:
        return f"tensorrt_rtx (whose bindings tensorrt.plugin runs on here) does not import: {exc}"
    saved = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "tensorrt"}
    trt = types.ModuleType("tensorrt")
    trt.__dict__.update({k: v for k, v in vars(rtx).items() if not k.startswith("__")})
    trt.__version__ = rtx.__version__
    trt.__path__ = [str(package)]  # type: ignore[attr-defined]
    if not hasattr(trt, "ISymExpr"):
        trt.ISymExpr = _NoISymExpr  # type: ignore[attr-defined]
    for name in saved:
        del sys.modules[name]
    sys.modules["tensorrt"] = trt
    try:
        importlib.import_module("tensorrt.plugin")
        return {name: module for name, module in sys.modules.items() if name.split(".")[0] == "tensorrt"}
    finally:  # tests put the modules back with monkeypatch, one test at a time
        for name in [n for n in sys.modules if n.split(".")[0] == "tensorrt"]:
            del sys.modules[name]
        sys.modules.update(saved)


def install(monkeypatch: pytest.MonkeyPatch, version: str = TRTP_VERSION) -> tuple[Any, Any]:
    """(tensorrt, tensorrt.plugin) of release ``version`` in sys.modules for this test (undone by monkeypatch), or
    skip with the reason."""
    modules = _load(version)
    if isinstance(modules, str):
        pytest.skip(modules)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return modules["tensorrt"], modules["tensorrt.plugin"]


def fields(trt: Any, attrs: dict[str, Any]) -> tuple[Any, list[np.ndarray]]:
    """A PluginFieldCollection of ``attrs`` as the ONNX parser passes node attributes (arrays, never scalars), and
    the arrays, which must outlive it (a PluginField points into its array)."""
    kinds = {np.dtype(np.int32): trt.PluginFieldType.INT32, np.dtype(np.float32): trt.PluginFieldType.FLOAT32}
    arrays = [np.atleast_1d(value if isinstance(value, np.ndarray) else
                            np.asarray(value, dtype=np.int32 if isinstance(value, int) else np.float32))
              for value in attrs.values()]
    collection = [trt.PluginField(name, array, kinds[array.dtype]) for name, array in zip(attrs, arrays)]
    return trt.PluginFieldCollection(collection), arrays


def create_plugin(trt: Any, trtp: Any, plugin_id: str, attrs: dict[str, Any]) -> Any:
    """A plugin instance from the package's own creator class, as TensorRT's plugin registry would make it (built
    directly, so a C++ creator of the same name registered earlier in this process cannot answer instead)."""
    namespace, name = plugin_id.split("::")
    creator = trtp._lib._TemplatePluginCreator(name, namespace, {})
    collection, _arrays = fields(trt, attrs)
    return creator.create_plugin(name, namespace, collection, trt.TensorRTPhase.BUILD)


class DimExpr:
    """Stand-in for TensorRT's IDimensionExpr (C++, made only by a build's IExprBuilder); ``evaluate`` gives its value
    for given symbol values."""

    def __init__(self, text: str, value: int | None = None,
                 evaluate: Callable[[dict[str, int]], int] | None = None) -> None:
        self.text, self.value = text, value
        self.evaluate = evaluate or (lambda env: value if value is not None else env[text])

    def is_constant(self) -> bool:
        return self.value is not None

    def get_constant_value(self) -> int:
        assert self.value is not None, f"{self.text} is not a build-time constant"
        return self.value

    def is_size_tensor(self) -> bool:
        return False

    def __repr__(self) -> str:
        return self.text


class ExprBuilder:
    """Stand-in for IExprBuilder: ``constant`` and ``operation`` only; an operation on constants is a constant."""

    def __init__(self, trt: Any) -> None:
        op = trt.DimensionOperation
        self.ops: dict[Any, tuple[str, Callable[[int, int], int]]] = {
            op.SUM: ("+", operator.add), op.SUB: ("-", operator.sub), op.PROD: ("*", operator.mul),
            op.FLOOR_DIV: ("//", operator.floordiv), op.MAX: ("max", max), op.MIN: ("min", min),
            op.CEIL_DIV: ("ceil_div", lambda a, b: -(-a // b)), op.EQUAL: ("==", lambda a, b: int(a == b)),
            op.LESS: ("<", lambda a, b: int(a < b))}

    def constant(self, value: int) -> DimExpr:
        return DimExpr(str(value), int(value))

    def operation(self, op: Any, a: DimExpr, b: DimExpr) -> DimExpr:
        symbol, fn = self.ops[op]
        value = fn(a.value, b.value) if a.value is not None and b.value is not None else None
        return DimExpr(f"({a.text} {symbol} {b.text})", value, lambda env: fn(a.evaluate(env), b.evaluate(env)))


def output_shapes(trt: Any, plugin: Any, inputs: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch
                  ) -> list[list[DimExpr]]:
    """The plugin's real ``get_output_shapes`` on input dims (ints become constants, strings symbols), with the
    stand-in builder: TensorRT's IDimensionExpr and DimsExprs classes are swapped for it during the call."""
    builder = ExprBuilder(trt)
    monkeypatch.setattr(trt, "IDimensionExpr", DimExpr)
    monkeypatch.setattr(trt, "DimsExprs", lambda n: [None] * n)
    monkeypatch.setattr(sys.modules["tensorrt.plugin._tensor"].SymIntExpr, "_exprBuilder", None)  # reset after
    exprs = [[builder.constant(d) if isinstance(d, int) else DimExpr(d) for d in shape] for shape in inputs]
    return [list(dims) for dims in plugin.get_output_shapes(exprs, [], builder)]


def tensor_desc(trt: Any, shape: tuple[int, ...], dtype: Any) -> Any:
    """A DynamicPluginTensorDesc as TensorRT passes to get_supported_format_combinations (real binding class)."""
    desc = trt.PluginTensorDesc()
    desc.dims, desc.type, desc.format = trt.Dims(list(shape)), dtype, trt.TensorFormat.LINEAR
    dynamic = trt.DynamicPluginTensorDesc()
    dynamic.desc = desc
    return dynamic


def enqueue(trt: Any, plugin: Any, inputs: list[tuple[tuple[int, ...], Any, int]],
            outputs: list[tuple[tuple[int, ...], Any, int]], stream: int) -> None:
    """The plugin's real ``enqueue`` as TensorRT calls it: (shape, dtype, device address) per input and output."""
    def descs(items: list[tuple[tuple[int, ...], Any, int]]) -> list[Any]:
        made = []
        for shape, dtype, _ in items:
            desc = trt.PluginTensorDesc()
            desc.dims, desc.type, desc.format = trt.Dims(list(shape)), dtype, trt.TensorFormat.LINEAR
            made.append(desc)
        return made

    strides = [trt.Dims([0]) for _ in inputs], [trt.Dims([0]) for _ in outputs]
    plugin.enqueue(descs(inputs), descs(outputs), [p for _, _, p in inputs], [p for _, _, p in outputs], *strides,
                   stream)


def deregister(trt: Any, trtp: Any) -> None:
    """Take the package's creators out of TensorRT-RTX's process-wide registry and its own registrations out of the
    package (``QDP_REGISTRY``, the ``tensorrt.plugin.op.<namespace>`` attributes), so later tests of the session (C++
    plugins under the same names, or a registration of their own) find both as they would in a process of their
    own."""
    registry = trt.get_plugin_registry()
    for creator in trtp._lib.QDP_CREATORS.values():
        if isinstance(creator, trt.IPluginCreatorV3Quick):
            registry.deregister_creator(creator)
    trtp._lib.QDP_CREATORS.clear()
    for plugin_id in list(trtp._lib.QDP_REGISTRY):
        namespace, name = plugin_id.split("::")
        vars(trtp._lib.op.define_or_get(namespace)).pop(name, None)
    trtp._lib.QDP_REGISTRY.clear()
