"""The documentation cannot rot: its Python blocks run, its C++ excerpts match the sources, and the site builds.

Conventions of ``docs/*.md`` (also in docs/contributing.md):

* Every fenced ```` ```python ```` block runs. The blocks of one page run in order, in one fresh Python process, in
  one namespace, in an empty temporary folder (so later blocks use what earlier ones defined and files they wrote).
* A block directly preceded by ``<!-- not-run: <reason> -->`` is shown but not run (needs a GPU, a shell, ...); the
  reason is required.
* A block directly preceded by ``<!-- excerpt: <path> -->`` must appear verbatim (line by line, ignoring trailing
  spaces) in that repository file, so quoted kernel and plugin code stays the real code.
* ``mkdocs build --strict`` must pass (warnings are errors); skipped with the reason where mkdocs is not installed
  (``pip install 'torchtrt_ext[docs]'``).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import torchtrt_ext

ROOT = Path(__file__).resolve().parents[1]
# Where the imported package lives: ROOT in a checkout, site-packages when the tests run against an installed wheel.
PACKAGE_PARENT = Path(torchtrt_ext.__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md"))
_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!--\s*(not-run|excerpt):\s*(.*?)\s*-->\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    marker: str | None  # "not-run" / "excerpt"
    argument: str  # the reason or the path


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page with the marker comment directly above each, if any."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, lang = i, match.group(1)
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"{page.name}:{start + 1}: unclosed code fence"
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(prev.strip())
        found.append(Block(page, start + 1, lang, "\n".join(lines[start + 1:end]),
                           marker.group(1) if marker else None, marker.group(2) if marker else ""))
        i = end + 1
    return found


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang == "python" and b.marker is None]


def script_for(page: Path) -> str:
    """One script running the page's blocks in order; each block is labelled so a failure names its line."""
    parts = ["import sys", "__docs_block = None"]
    for block in runnable(page):
        parts.append(f"__docs_block = {f'{page.relative_to(ROOT)}:{block.line}'!r}")
        parts.append(f"print('--- block', __docs_block, flush=True)")
        parts.append(f"exec(compile({block.code!r}, __docs_block, 'exec'))")
    return "\n".join(parts) + "\n"


RUNNABLE_PAGES = [p for p in PAGES if runnable(p)]


def test_conventions_hold() -> None:
    """Every page has at least one block or none; every marker has its argument; python/bash/cpp only."""
    assert (DOCS / "index.md").is_file()
    for page in PAGES:
        for block in blocks(page):
            where = f"{page.relative_to(ROOT)}:{block.line}"
            if block.marker is not None:
                assert block.argument, f"{where}: <!-- {block.marker}: ... --> needs a reason or a path"
            if block.marker == "excerpt":
                assert block.lang in ("cpp", "c", "cuda", "cmake", "python"), where


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=[p.name for p in RUNNABLE_PAGES])
def test_runnable_blocks(page: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "TORCHTRT_EXT_CACHE_DIR": str(tmp_path / "cache")}
    script = tmp_path / "page_blocks.py"
    script.write_text(script_for(page))
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, str(script)], cwd=work, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, f"a block of {page.name} failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"


EXCERPTS = [b for p in PAGES for b in blocks(p) if b.marker == "excerpt"]


@pytest.mark.parametrize("block", EXCERPTS, ids=[f"{b.page.name}:{b.line}" for b in EXCERPTS])
def test_excerpts_match_the_sources(block: Block) -> None:
    source = (PACKAGE_PARENT if block.argument.startswith("torchtrt_ext/") else ROOT) / block.argument
    assert source.is_file(), f"{block.page.name}:{block.line}: {block.argument} does not exist"
    text = "\n".join(line.rstrip() for line in source.read_text().splitlines())
    quoted = "\n".join(line.rstrip() for line in block.code.splitlines())
    assert quoted in text, f"{block.page.name}:{block.line}: the excerpt is not (or no longer) in {block.argument}"


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs / mkdocstrings are not installed (pip install 'torchtrt_ext[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    api = (tmp_path / "site" / "api" / "deploy" / "index.html").read_text()
    assert "triton_repository" in api  # the API reference is generated from the docstrings


def test_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in PAGES:
        assert str(page.relative_to(DOCS)) in nav, f"{page.relative_to(ROOT)} is not in mkdocs.yml's nav"
