"""The timing cache file of a build (``build_engine(timing_cache=...)``): attached before the build, merged back after.

TensorRT's rules (NvInfer.h): ``create_timing_cache`` may give None for a blob it cannot read; ``set_timing_cache``
returns False for a cache made on another GPU or TensorRT version (``ignore_mismatch=False``), and ``combine``
returns False for one of another version or GPU. Each False is a warning and a fallback here, never a silent cache
that is not used. Builds sharing one file merge into it under a file lock, as Polygraphy does.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from torchtrt_ext._files import atomic_write, file_lock

if TYPE_CHECKING:
    import tensorrt as trt_t

log = logging.getLogger("torchtrt_ext.backend")


def attach(config: trt_t.IBuilderConfig, path: Path) -> None:
    """Attach the timing cache file at ``path`` (an empty cache where there is none). A file TensorRT cannot read, or
    will not attach (made on another GPU or TensorRT version: ``set_timing_cache`` returns False), is replaced by an
    empty cache, with a warning; the file is then replaced after the build."""
    blob = path.read_bytes() if path.is_file() else b""
    cache = config.create_timing_cache(blob)
    if cache is not None and config.set_timing_cache(cache, False):
        return
    log.warning("timing cache %s %s; building with an empty one, which replaces the file after the build", path,
                "cannot be read" if cache is None else "does not fit this GPU or TensorRT version")
    empty = config.create_timing_cache(b"")
    if empty is None or not config.set_timing_cache(empty, False):
        log.warning("TensorRT refused an empty timing cache too; building without one")


def save(config: trt_t.IBuilderConfig, path: Path) -> None:
    """Merge the build's timing cache into the file at ``path`` under a file lock (as Polygraphy does), so builds
    sharing the file add their timings instead of the last one overwriting the others'. A file that cannot be
    merged (unreadable, or of another GPU or TensorRT version) is replaced, with a warning; a write that fails is
    a warning too (the engine is built)."""
    cache = config.get_timing_cache()
    if cache is None:
        return
    try:
        with file_lock(path.with_name(path.name + ".lock")):
            blob = path.read_bytes() if path.is_file() else b""
            if blob:
                on_disk = config.create_timing_cache(blob)
                if on_disk is None or not cache.combine(on_disk, False):
                    log.warning("timing cache %s cannot be merged with this build's (unreadable, or made on another "
                                "GPU or TensorRT version); replacing it", path)
            atomic_write(path, bytes(cache.serialize()))
    except OSError as exc:
        log.warning("could not write the timing cache %s (%s); the engine is built without saving it", path, exc)
