"""The timing cache file (torchtrt_ext.backend.timing_cache_file) against a stand-in for TensorRT's timing-cache API.

TensorRT-RTX's timing-cache calls are no-ops (deprecated since RTX 1.2: ``set_timing_cache`` always returns True), so
the stand-in ``Config`` follows full TensorRT's rules from NvInfer.h instead, no more permissive:
``create_timing_cache`` gives None for a blob it cannot read, ``set_timing_cache(cache, False)`` returns False for a
cache of another device or version, ``combine(other, False)`` returns False for one of another device or version and
skips conflicting entries.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest

from torchtrt_ext._files import file_lock
from torchtrt_ext.backend import timing_cache_file

HERE = "H200/11.4"


class Cache:
    def __init__(self, header: str, entries: dict[str, float]) -> None:
        self.header, self.entries = header, dict(entries)

    def serialize(self) -> bytes:
        return json.dumps({"header": self.header, "entries": self.entries}).encode()

    def combine(self, other: Cache, ignore_mismatch: bool) -> bool:
        if other.header != self.header and not ignore_mismatch:
            return False
        for key, value in other.entries.items():
            self.entries.setdefault(key, value)  # conflicting entries are skipped
        return True


class Config:
    """Stand-in IBuilderConfig of a machine ``header`` (GPU and TensorRT version): its timing-cache calls only."""

    def __init__(self, header: str = HERE) -> None:
        self.header, self.attached = header, None

    def create_timing_cache(self, blob: bytes) -> Cache | None:
        if not blob:
            return Cache(self.header, {})
        try:
            data = json.loads(blob)
        except ValueError:
            return None
        return Cache(data["header"], data["entries"])

    def set_timing_cache(self, cache: Cache, ignore_mismatch: bool) -> bool:
        if cache.header != self.header and not ignore_mismatch:
            return False
        self.attached = cache
        return True

    def get_timing_cache(self) -> Cache | None:
        return self.attached


def _write(path: Path, header: str, entries: dict[str, float]) -> None:
    path.write_bytes(Cache(header, entries).serialize())


def test_a_cache_of_this_machine_is_attached(tmp_path: Path) -> None:
    path = tmp_path / "t.cache"
    _write(path, HERE, {"conv": 1.0})
    config = Config()
    timing_cache_file.attach(config, path)
    assert config.attached is not None and config.attached.entries == {"conv": 1.0}


@pytest.mark.parametrize("content,why", [(Cache("A100/10.13", {"conv": 1.0}).serialize(), "does not fit this GPU"),
                                         (b"\x00stale", "cannot be read")], ids=["other-gpu", "stale"])
def test_a_cache_tensorrt_refuses_falls_back_to_an_empty_one_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, why: str) -> None:
    path = tmp_path / "t.cache"
    path.write_bytes(content)
    config = Config()
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        timing_cache_file.attach(config, path)
    assert config.attached is not None and config.attached.header == HERE and config.attached.entries == {}
    assert why in caplog.text and str(path) in caplog.text


def test_builds_sharing_the_file_merge_instead_of_the_last_writer_winning(tmp_path: Path) -> None:
    path = tmp_path / "t.cache"
    _write(path, HERE, {"old": 0.5})
    first, second = Config(), Config()
    timing_cache_file.attach(first, path)
    timing_cache_file.attach(second, path)  # both read the file before either build ends
    first.attached.entries["conv"] = 1.0
    second.attached.entries["gemm"] = 2.0
    timing_cache_file.save(first, path)
    timing_cache_file.save(second, path)
    assert json.loads(path.read_bytes())["entries"] == {"old": 0.5, "conv": 1.0, "gemm": 2.0}


def test_a_file_of_another_machine_is_replaced_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                              ) -> None:
    path = tmp_path / "t.cache"
    config = Config()
    timing_cache_file.attach(config, path)
    config.attached.entries["conv"] = 1.0
    _write(path, "A100/10.13", {"theirs": 3.0})  # written meanwhile by a build elsewhere
    with caplog.at_level(logging.WARNING, logger="torchtrt_ext"):
        timing_cache_file.save(config, path)
    assert json.loads(path.read_bytes()) == {"header": HERE, "entries": {"conv": 1.0}}
    assert "cannot be merged" in caplog.text


def test_the_merge_waits_for_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "t.cache"
    config = Config()
    timing_cache_file.attach(config, path)
    done = threading.Event()
    with file_lock(tmp_path / "t.cache.lock"):
        saver = threading.Thread(target=lambda: (timing_cache_file.save(config, path), done.set()))
        saver.start()
        time.sleep(0.3)
        assert not done.is_set() and not path.exists()
    saver.join(10)
    assert done.is_set() and path.exists()
