"""The user's files (issue 20, items 6-8): every write is atomic, keeps the mode a plain write would give, and goes
through symlinks; an engine cache that cannot be written is still read."""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
import torch

import torchtrt_ext
from torchtrt_ext import deploy
from torchtrt_ext._files import atomic_write
from torchtrt_ext.errors import InvalidInputError
from tests.test_deploy import make_engine

REPO = Path(__file__).resolve().parents[1]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


def _write(writer: str, target: Path) -> None:
    engine = make_engine()
    if writer == "Engine.save":
        engine.save(target)
    else:
        deploy.export_plan(engine, target)


@pytest.mark.parametrize("writer", ["Engine.save", "deploy.export_plan"])
def test_new_file_gets_the_umask_mode(tmp_path: Path, umask_022: None, writer: str) -> None:
    target = tmp_path / "model.engine"
    _write(writer, target)
    assert _mode(target) == 0o644  # 0o666 & ~0o022, as open(path, "w") gives, not mkstemp's 0o600


@pytest.mark.parametrize("writer", ["Engine.save", "deploy.export_plan"])
def test_replaced_file_keeps_its_mode(tmp_path: Path, umask_022: None, writer: str) -> None:
    target = tmp_path / "model.engine"
    target.write_bytes(b"old")
    target.chmod(0o640)
    _write(writer, target)
    assert _mode(target) == 0o640 and target.read_bytes() != b"old"


def test_write_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "store" / "model.engine"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "current.engine"
    link.symlink_to(real)
    make_engine().save(link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == make_engine().to_bytes()


def test_triton_repository_files_get_the_umask_mode(tmp_path: Path, umask_022: None) -> None:
    repo = deploy.triton_repository(make_engine(plugins=()), tmp_path / "models", "det", max_batch_size=4,
                                    print_command=False)
    assert _mode(repo.plan_path) == 0o644 and _mode(repo.config_path) == 0o644


def test_missing_folder_is_an_error_not_created(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"folder .*nowhere does not exist.*Remedy: create the folder"):
        make_engine().save(tmp_path / "nowhere" / "x.engine")
    assert not (tmp_path / "nowhere").exists()


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def test_failed_export_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    """A write that fails half way (here: the file size limit, as with `ulimit -f` or a full disk) must leave the
    previous export untouched, not a truncated .onnx."""
    target = tmp_path / "model.onnx"
    torchtrt_ext.export_onnx(Tiny().eval(), (torch.randn(1, 64),), target)
    before = target.read_bytes()
    script = textwrap.dedent(f"""
        import resource, signal, torch, torchtrt_ext
        from tests.test_files import Tiny
        torch.manual_seed(1)
        model = Tiny().eval()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write over the limit fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) // 2}, resource.RLIM_INFINITY))
        try:
            torchtrt_ext.export_onnx(model, (torch.randn(1, 64),), {str(target)!r})
        except OSError as exc:
            print("write failed:", exc)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "write failed" in done.stdout, done.stdout + done.stderr[-2000:]
    assert target.read_bytes() == before
    onnx.checker.check_model(str(target))
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]  # no temporary file left behind


def test_a_write_that_must_not_follow_symlinks_replaces_the_link(tmp_path: Path) -> None:
    """The engine cache's writes: a symlink planted at the path is replaced by the file, its target is untouched."""
    target = tmp_path / "precious"
    target.write_bytes(b"keep")
    link = tmp_path / "cache.engine"
    link.symlink_to(target)
    atomic_write(link, b"engine", follow_symlinks=False)
    assert not link.is_symlink() and link.read_bytes() == b"engine" and target.read_bytes() == b"keep"


@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o755), (0o077, 0o700)])
def test_plugin_library_copy_follows_the_umask(tmp_path: Path, umask: int, expected: int) -> None:
    """A copied library keeps its execute bits as ``cp`` does, masked by the umask (issue 33, item 11)."""
    lib = tmp_path / "build" / "libtorchtrt_ext_plugins.so"
    lib.parent.mkdir()
    lib.write_bytes(b"\x7fELF fake library")
    (lib.parent / "libtorchtrt_ext_plugins_autoload.so").write_bytes(b"\x7fELF fake autoload")
    for source in lib.parent.iterdir():
        source.chmod(0o755)
    old = os.umask(umask)
    try:
        repo = deploy.triton_repository(make_engine(), tmp_path / "models", "det", max_batch_size=4,
                                        plugin_library=lib, print_command=False)
    finally:
        os.umask(old)
    assert repo.plugin_files and {_mode(p) for p in repo.plugin_files} == {expected}


def test_replaced_plugin_library_keeps_its_mode(tmp_path: Path, umask_022: None) -> None:
    lib = tmp_path / "build" / "libtorchtrt_ext_plugins.so"
    lib.parent.mkdir()
    lib.write_bytes(b"\x7fELF new library")
    (lib.parent / "libtorchtrt_ext_plugins_autoload.so").write_bytes(b"\x7fELF new autoload")
    lib.chmod(0o755)
    model_dir = tmp_path / "models" / "det"
    model_dir.mkdir(parents=True)
    old = model_dir / lib.name
    old.write_bytes(b"old")
    old.chmod(0o700)
    deploy.triton_repository(make_engine(), tmp_path / "models", "det", max_batch_size=4, plugin_library=lib,
                             print_command=False)
    assert _mode(old) == 0o700 and old.read_bytes() == b"\x7fELF new library"


_HANGING_WRITER = textwrap.dedent("""
    import sys, time
    from torchtrt_ext._files import atomic_write

    def write(handle):
        handle.write(b"x" * 4096)
        handle.flush()
        print("writing", flush=True)
        time.sleep(600)

    atomic_write(sys.argv[1], write)
""")


def _start_writer(target: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", _HANGING_WRITER, str(target)], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
    return proc


def _temporaries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name.endswith(".tmp"))


def _age(path: Path, seconds: float) -> None:
    then = path.stat().st_mtime - seconds
    os.utime(path, (then, then))


def test_temporary_of_a_killed_writer_is_removed_on_the_next_write(tmp_path: Path) -> None:
    """kill -9 during a write leaves `.m.onnx.*.tmp`; the next write to the folder removes it (issue 33, item 10)."""
    proc = _start_writer(tmp_path / "m.onnx")
    (left,) = _temporaries(tmp_path)
    assert left.name.startswith(".m.onnx.")
    proc.kill()
    proc.wait()
    _age(left, 120)  # older than the grace period a writer has to lock its new file
    user_file = tmp_path / ".notes.tmp"  # not our pattern: never touched
    user_file.write_bytes(b"mine")
    _age(user_file, 3600)
    torchtrt_ext.export_onnx(Tiny().eval(), (torch.randn(1, 64),), tmp_path / "other.onnx")
    assert _temporaries(tmp_path) == [user_file]
    assert (tmp_path / "other.onnx").is_file() and not (tmp_path / "m.onnx").exists()


def test_temporary_of_a_live_writer_is_kept(tmp_path: Path) -> None:
    proc = _start_writer(tmp_path / "m.onnx")
    try:
        (live,) = _temporaries(tmp_path)
        _age(live, 3600)  # however old: its writer still holds the lock
        make_engine().save(tmp_path / "x.engine")
        assert live.exists()
    finally:
        proc.kill()
        proc.wait()
    make_engine().save(tmp_path / "x.engine")  # the writer is gone now
    assert not live.exists()


def test_fresh_temporary_is_kept_even_unlocked(tmp_path: Path) -> None:
    """A temporary seconds old may belong to a writer between creating and locking it."""
    fresh = tmp_path / ".m.onnx.abcd1234.tmp"
    fresh.write_bytes(b"partial")
    make_engine().save(tmp_path / "x.engine")
    assert fresh.exists()


def test_external_data_write_leaves_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchtrt_ext._files import save_onnx

    monkeypatch.setattr("torchtrt_ext.passes.shapes.too_big", lambda model: True)  # stand-in for a > 2 GiB model
    model = torchtrt_ext.export_onnx(Tiny().eval(), (torch.randn(1, 64),))
    save_onnx(model, tmp_path / "big.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx", "big.onnx.data"]
    onnx.checker.check_model(str(tmp_path / "big.onnx"))
