"""Writing the user's files: atomically, with the mode a plain write would give, through symlinks.

Every file the package writes goes through ``atomic_write``: the bytes go to a temporary file in the target's folder,
which then replaces the target with ``os.replace``, so a reader (or a failed write: full disk, ``ulimit -f``) sees
the old file or the whole new one, never a truncated one. A new file gets the mode the umask gives (``0o666 &
~umask``, as ``open(path, "w")`` would), a replaced file keeps its mode, and a symlink is written through (its target
is replaced, the link stays) except where the caller says not to (the engine cache). ``file_lock`` takes an
inter-process lock, never through a symlink.

A writer killed half way (``kill -9``, a crash) cannot remove its temporary file, so every write first removes the
stale temporaries of our own pattern in its folder (``remove_stale_temporaries``). Each writer holds an exclusive
``flock`` on its temporary until it is renamed; the kernel drops the lock when the process dies, however it dies, so
a temporary nobody holds locked is an orphan. That proof does not depend on process ids (reused, or of another host on
a shared folder) or on guessing how long a large write may take.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO, Union

import onnx

from torchtrt_ext.errors import FileWriteError, InvalidInputError, failure

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no inter-process lock
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("torchtrt_ext")

Writer = Callable[[BinaryIO], None]

#: our temporaries: ``.<target name>.<8 random characters from tempfile>.tmp`` (a file, or a folder for external data)
_TEMPORARY = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")
#: a temporary younger than this is kept even unlocked: its writer may be between creating and locking it
STALE_AFTER_S = 60.0


def current_umask() -> int:
    """The process umask: from /proc on Linux, else by setting it and putting it back (no read-only call)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _resolved(target: Path) -> Path:
    """The file a write to ``target`` must replace: the end of a symlink chain, else ``target`` itself."""
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def _mode_for(target: Path, new_mode: int = 0o666) -> int:
    """The mode a write gives ``target``: the one the regular file has when it exists (a symlink is not followed),
    else ``new_mode`` masked by the umask."""
    try:
        st = os.stat(target, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    return stat.S_IMODE(st.st_mode) if st is not None and stat.S_ISREG(st.st_mode) else new_mode & ~current_umask()


def _writable(path: str | os.PathLike[str], follow_symlinks: bool = True) -> Path:
    """The file to replace for a write to ``path``; InvalidInputError when its folder does not exist."""
    target = _resolved(Path(path)) if follow_symlinks else Path(path)
    if not target.parent.is_dir():
        raise InvalidInputError(failure(f"cannot write {path}: the folder {target.parent} does not exist",
                                        "an output path in an existing folder",
                                        f"create the folder first (mkdir -p {target.parent}) or check the path"))
    return target


def _lock(path: str | os.PathLike[str], *, wait: bool) -> int | None:
    """An fd holding an exclusive flock on ``path`` (a file or a folder); None when another process holds it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def remove_stale_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries of our own pattern in ``folder`` that no live writer holds; return what was removed.

    Stale means: named like ours (``.<name>.<random>.tmp``), not modified for ``STALE_AFTER_S`` and not locked (its
    writer died without cleaning up). Anything else is left alone; errors (a read-only folder) are ignored.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        if not _TEMPORARY.match(entry.name):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < STALE_AFTER_S or entry.is_symlink():
                continue
            fd = _lock(entry.path, wait=False)
            if fd is None:
                continue  # a live writer holds it
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            finally:
                os.close(fd)
        except OSError:
            continue
        removed.append(Path(entry.path))
    if removed:
        log.info("removed %d temporary file(s) left by a writer that was killed in %s: %s", len(removed), folder,
                 ", ".join(p.name for p in removed))
    return removed


def _write_failed(target: Path, exc: OSError) -> FileWriteError:
    """The project's error for a write the file system refused, naming the file (the old one is left whole)."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    remedy = (f"free space on the file system of {target.parent} (or raise the quota / file size limit), or write "
              "elsewhere" if full else f"check the permissions of {target.parent}, or write elsewhere")
    return FileWriteError(failure(f"could not write {target}: {exc.strerror or exc}",
                                  "a folder with room for the file that this user can write", remedy))


def _publish(tmp: str | os.PathLike[str], target: Path, new_mode: int = 0o666) -> None:
    """Give the finished temporary file ``tmp`` the target's mode and move it over ``target`` in one rename."""
    os.chmod(tmp, _mode_for(target, new_mode))
    os.replace(tmp, target)


def atomic_write(path: str | os.PathLike[str], data: Union[bytes, Writer], *, follow_symlinks: bool = True,
                 new_mode: int = 0o666) -> Path:
    """Write ``data`` (bytes, or a function writing to a binary file) to ``path`` atomically; return the path.

    The folder must exist (``InvalidInputError`` naming it otherwise): a mistyped ``-o`` folder is an error, not a
    reason to create folders. A new file gets ``new_mode`` masked by the umask; a replaced one keeps its mode.
    ``follow_symlinks=False`` (a folder others can write, such as a shared cache): a symlink at ``path`` is
    replaced by the file, never written through.
    """
    target = _writable(path, follow_symlinks)
    remove_stale_temporaries(target.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise _write_failed(target, exc) from exc
    lock = None
    try:
        lock = _lock(tmp, wait=True)  # held until the rename: the proof that this temporary is not stale
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, (bytes, bytearray, memoryview)):
                handle.write(data)
            else:
                data(handle)
            handle.flush()
            os.fsync(handle.fileno())
        _publish(tmp, target, new_mode)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, FileWriteError):
            raise _write_failed(target, exc) from exc
        raise
    finally:
        if lock is not None:
            os.close(lock)
    return target


def atomic_copy(source: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """Copy ``source`` to ``path`` atomically, with the mode ``cp`` gives: a new file the source's mode masked by the
    umask (a library stays executable, a umask of 077 keeps it private), a replaced file its own mode."""
    with open(source, "rb") as handle:
        return atomic_write(path, lambda out: shutil.copyfileobj(handle, out),
                            new_mode=stat.S_IMODE(os.stat(source).st_mode))


def save_onnx(model: onnx.ModelProto, path: str | os.PathLike[str]) -> Path:
    """Write ``model`` to ``path`` atomically; return the path.

    A model over protobuf's 2 GiB limit cannot be one file: its weights go to ``<file>.data`` beside it (ONNX
    external data, which ``onnx.load``, onnxruntime and TensorRT's parser read from there), with a warning that says so.
    """
    from torchtrt_ext.passes.shapes import too_big

    target = _writable(path)
    if not too_big(model):
        return atomic_write(target, model.SerializeToString())
    data_name = f"{target.name}.data"
    log.warning("%s is over protobuf's 2 GiB limit: its weights are written to %s beside it (ONNX external data); "
                "keep the two files together", target.name, data_name)
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # onnx.save_model moves the weights out of the model it saves
    remove_stale_temporaries(target.parent)
    tmp = tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    lock = _lock(tmp, wait=True)
    try:
        onnx.save_model(copy, os.path.join(tmp, target.name), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data_name)
        _publish(os.path.join(tmp, data_name), target.parent / data_name)
        _publish(os.path.join(tmp, target.name), target)
    except OSError as exc:
        raise _write_failed(target, exc) from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if lock is not None:
            os.close(lock)
    return target


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive inter-process lock on the lock file ``path`` (created if missing), never through a symlink
    (``O_NOFOLLOW``: in a shared folder a planted link would make us create or lock another file). OSError when it
    cannot be opened; no lock where the OS has no ``fcntl`` (atomic writes still hold)."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same existing file (through symlinks, hard links and relative paths)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


@contextlib.contextmanager
def onnx_file_of(model: onnx.ModelProto) -> Iterator[Path]:
    """A temporary .onnx file of ``model``, its weights in external data beside it, for readers that take a path (the
    TensorRT parser's ``parse_from_file``, onnxruntime): the way to hand them a model over protobuf's 2 GiB limit,
    which cannot be serialized as one message. Removed on exit."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)  # onnx.save_model moves the weights out of the model it saves
    with tempfile.TemporaryDirectory(prefix="torchtrt_ext-onnx-") as folder:
        path = Path(folder) / "model.onnx"
        onnx.save_model(copy, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location="model.onnx.data")
        yield path


@functools.lru_cache(maxsize=16)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 of the file at ``path`` (cached by path, size and modification time)."""
    info = path.stat()
    return _sha256_cached(str(path), info.st_size, info.st_mtime_ns)
