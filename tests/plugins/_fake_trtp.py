"""A stand-in for ``tensorrt`` + ``tensorrt.plugin`` (TensorRT >= 10.6) where TensorRT is not installed.

It checks what the real ``tensorrt.plugin`` checks about the three functions of a plugin (annotated register
arguments without defaults, tensors first, and the exact argument order of autotune and impl) and calls them the way
its plugin class does (register with keyword attributes; autotune and impl with positional attributes and
``stream=`` by keyword). It computes nothing of TensorRT's own.
"""
from __future__ import annotations

import enum
import inspect
import sys
import types
import typing
from typing import Any


class DataType(enum.Enum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    BF16 = 7
    INT64 = 8


class Sym:
    """A symbolic dimension with the arithmetic of tensorrt.plugin's ShapeExpr."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _op(self, op: str, other: Any) -> Sym:
        return Sym(f"({self.text} {op} {getattr(other, 'text', other)})")

    def __add__(self, other: Any) -> Sym:
        return self._op("+", other)

    def __sub__(self, other: Any) -> Sym:
        return self._op("-", other)

    def __mul__(self, other: Any) -> Sym:
        return self._op("*", other)

    def __floordiv__(self, other: Any) -> Sym:
        return self._op("//", other)

    __radd__, __rmul__ = __add__, __mul__

    def __repr__(self) -> str:
        return self.text


class TensorDesc:
    def __init__(self, shape_expr: tuple = (), dtype: Any = DataType.FLOAT, shape: tuple | None = None) -> None:
        self.shape_expr = tuple(shape_expr)
        self.dtype = dtype
        self.shape = shape if shape is not None else tuple(d if isinstance(d, int) else -1 for d in shape_expr)


class Tensor:
    def __init__(self, data_ptr: int, shape: tuple, dtype: Any) -> None:
        self.data_ptr, self.shape, self.dtype = data_ptr, tuple(shape), dtype


class AutoTuneCombination:
    def __init__(self, io_types: str | None = None, layouts: str | None = None, tactics: Any = None) -> None:
        self.io_types = [s.strip() for s in (io_types or "").split(",") if s.strip()]
        self.layouts = [s.strip() for s in (layouts or "LINEAR").split(",")]


def from_shape_expr(shape_expr: tuple, dtype: Any) -> TensorDesc:
    return TensorDesc(tuple(shape_expr), dtype)


class PluginDef:
    def __init__(self, register: Any, tensors: list[str], attrs: dict[str, Any]) -> None:
        self.register, self.tensors, self.attrs = register, tensors, attrs
        self.autotune: Any = None
        self.impl: Any = None

    def _schema(self, fn: Any, tail: list[str]) -> list[str]:
        names = list(inspect.signature(fn).parameters)
        attrs = [n for n in self.attrs if n in names]
        expected = self.tensors + attrs + tail
        if names != expected:
            raise ValueError(f"signature {names} does not match the expected schema {expected}")
        for name, param in inspect.signature(fn).parameters.items():
            if name in self.attrs and param.annotation is not inspect.Parameter.empty \
                    and param.annotation != self.attrs[name]:
                raise ValueError(f"attribute {name!r} annotated {param.annotation}, registered {self.attrs[name]}")
        return attrs

    def descs(self, inputs: list[TensorDesc], attrs: dict[str, Any]) -> Any:
        return self.register(*inputs, **attrs)

    def combinations(self, inputs: list[TensorDesc], attrs: dict[str, Any], outputs: tuple) -> Any:
        names = self._schema(self.autotune, ["outputs"])
        return self.autotune(*inputs, *[attrs[n] for n in names], outputs)

    def run(self, inputs: list[Tensor], attrs: dict[str, Any], outputs: tuple, stream: int) -> None:
        names = self._schema(self.impl, ["outputs", "stream"])
        self.impl(*inputs, *[attrs[n] for n in names], outputs, stream=stream)


REGISTRY: dict[str, PluginDef] = {}


def _is_ndarray(annotation: Any) -> bool:
    """numpy arrays (np.ndarray or np.ndarray[shape, dtype]) are attribute types tensorrt.plugin accepts too."""
    import numpy as np

    return annotation is np.ndarray or typing.get_origin(annotation) is np.ndarray


def register(plugin_id: str) -> Any:
    namespace, name = plugin_id.split("::")

    def decorate(fn: Any) -> Any:
        if plugin_id in REGISTRY:
            raise ValueError(f"plugin {plugin_id} is already registered")
        sig = inspect.signature(fn)
        tensors, attrs, seen_attr = [], {}, False
        for pname, param in sig.parameters.items():
            if param.annotation is inspect.Parameter.empty:
                raise ValueError(f"argument {pname} has no type annotation")
            if param.default is not inspect.Parameter.empty:
                raise ValueError(f"argument {pname} has a default value")
            if inspect.isclass(param.annotation) and issubclass(param.annotation, TensorDesc):
                if seen_attr:
                    raise ValueError("tensors and attributes interspersed")
                tensors.append(pname)
            else:
                if param.annotation not in (int, float, str, bytes, bool) and not _is_ndarray(param.annotation):
                    raise ValueError(f"attribute {pname} of unsupported type {param.annotation}")
                attrs[pname] = param.annotation
                seen_attr = True
        ret = sig.return_annotation
        if not (ret is TensorDesc or typing.get_origin(ret) is tuple):
            raise ValueError(f"return annotation {ret} is not TensorDesc or Tuple[TensorDesc]")
        REGISTRY[plugin_id] = PluginDef(fn, tensors, attrs)
        ns = op.__dict__.setdefault(namespace, types.SimpleNamespace())
        setattr(ns, name, REGISTRY[plugin_id])
        return fn

    return decorate


def autotune(plugin_id: str) -> Any:
    def decorate(fn: Any) -> Any:
        REGISTRY[plugin_id]._schema(fn, ["outputs"])
        REGISTRY[plugin_id].autotune = fn
        return fn

    return decorate


def impl(plugin_id: str) -> Any:
    def decorate(fn: Any) -> Any:
        REGISTRY[plugin_id]._schema(fn, ["outputs", "stream"])
        REGISTRY[plugin_id].impl = fn
        return fn

    return decorate


op = types.SimpleNamespace()


def install(monkeypatch: Any) -> types.ModuleType:
    """Put fake ``tensorrt`` and ``tensorrt.plugin`` modules in sys.modules (undone by monkeypatch)."""
    trt = types.ModuleType("tensorrt")
    trt.__version__ = "10.6.0 (fake)"
    trt.DataType = DataType
    plugin = sys.modules[__name__]
    trt.plugin = plugin
    REGISTRY.clear()
    op.__dict__.clear()
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setitem(sys.modules, "tensorrt.plugin", plugin)
    return plugin
