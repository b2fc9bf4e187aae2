"""Make ``libtensorrt_rtx.so`` resolve to the TensorRT-RTX library this process loaded, before a plugin node is parsed.

TensorRT-RTX's ONNX parser, once a plugin creator has made a plugin for a node, calls ``dlopen("libtensorrt_rtx.so")``
(the unversioned linker name) and ``dlsym(handle, "getPrivateApi_INTERNAL")``. The pip wheel ships only
``libtensorrt_rtx.so.1``, so that dlopen fails and the parser ends the process (``std::terminate``, "terminate called
without an active exception"). Pointing the name at a second copy of the library fails too: a second instance.

The mechanism: load ``libtorchtrt_ext_rtx_alias.so`` (built by setup.py from ``csrc/rtx_alias``), a library without
code whose SONAME is ``libtensorrt_rtx.so`` and whose one dependency is ``libtensorrt_rtx.so.1``. glibc answers a
later ``dlopen`` of a bare name with an already loaded object carrying that SONAME, and ``dlsym`` through its handle
searches its dependency, the wheel library already in memory. Nothing is written anywhere (a read-only or shared
site-packages is fine), nothing is loaded twice, and the result is checked: both names must give the same entry
point address.
"""
from __future__ import annotations

import ctypes
import functools
import logging
import os
from pathlib import Path

from torchtrt_ext import _native
from torchtrt_ext.errors import BuildError, failure

log = logging.getLogger("torchtrt_ext.backend")

LINKER_NAME = "libtensorrt_rtx.so"
LOADED_NAME = "libtensorrt_rtx.so.1"
ENTRY_POINT = "getPrivateApi_INTERNAL"  # what the parser looks up through the handle
_REMEDY = "import tensorrt_rtx first (torchtrt_ext.backend.load_backend('tensorrt_rtx') does), then retry"


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _loaded(name: str) -> ctypes.CDLL | None:
    """The already loaded library answering to ``name`` (by file name or SONAME), or None; never loads one."""
    try:
        return ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return None


def _entry(library: ctypes.CDLL) -> tuple[int, str]:
    """(address, file) of ENTRY_POINT as seen through ``library``'s handle."""
    address = ctypes.cast(getattr(library, ENTRY_POINT), ctypes.c_void_p).value or 0
    info = _DlInfo()
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    found = dladdr(ctypes.c_void_p(address), ctypes.byref(info))
    return address, (info.dli_fname or b"?").decode() if found else "?"


@functools.lru_cache(maxsize=None)
def ensure_rtx_linker_name() -> Path:
    """Make ``dlopen("libtensorrt_rtx.so")`` return the loaded ``libtensorrt_rtx.so.1`` (once per process).

    Call it after importing ``tensorrt_rtx`` and before parsing a graph with plugin nodes; returns the loaded library's
    path. Raises LibraryNotFoundError when the alias library is not built, BuildError when the name cannot be made to
    resolve to the loaded library.
    """
    real = _loaded(LOADED_NAME)
    if real is None:
        raise BuildError(failure(f"{LOADED_NAME} is not loaded in this process",
                                 "the TensorRT-RTX library imported by the tensorrt_rtx package", _REMEDY))
    real_address, real_path = _entry(real)
    if _loaded(LINKER_NAME) is None:
        alias = _native.rtx_alias_library_path()  # LibraryNotFoundError names the rebuild command
        try:
            ctypes.CDLL(str(alias))
        except OSError as exc:
            raise BuildError(failure(f"could not load {alias}: {exc}",
                                     f"a library whose one dependency, {LOADED_NAME}, is already loaded",
                                     _REMEDY)) from exc
        log.info("TensorRT-RTX: %s now resolves to the loaded %s (through %s), so its ONNX parser can import plugin "
                 "nodes", LINKER_NAME, real_path, alias)
    resolved = _loaded(LINKER_NAME)
    address, path = _entry(resolved) if resolved is not None else (0, "nothing")
    if address != real_address:
        raise BuildError(failure(
            f"{LINKER_NAME} resolves to {path}, not to the loaded {real_path}: TensorRT-RTX's ONNX parser would use "
            "a second instance of the library (or none) for plugin nodes",
            f"{LINKER_NAME} answering with the loaded {real_path}",
            f"remove the other library answering to {LINKER_NAME} from this process (it was loaded before "
            "torchtrt_ext), or build with plugins='decompose'"))
    return Path(real_path)
