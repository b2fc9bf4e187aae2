"""Install the ``tensorrt-stubs`` type stubs for mypy, into their own folder, and repair what mypy cannot parse.

Run from the repository root before ``mypy`` (CI does)::

    python -m tests.backend.trt_stubs            # -> build/mypy-stubs (mypy.ini's mypy_path)

Why a separate folder: the package installs ``tensorrt/__init__.pyi`` without ``__init__.py``, so in the test
environment ``import tensorrt`` would succeed as an empty namespace package and fool "is TensorRT installed?" checks.
Why repairs: the generated stubs (10.13) contain a few lines that are not valid Python (a parameter named ``in``, a
parameter without default after defaulted ones, an import of the absent ``tensorrt_libs``); mypy stops at them.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

TARGET = Path("build/mypy-stubs")
VERSION = "tensorrt-stubs==10.13.0.35.1"


def _valid(signature: str) -> bool:
    try:
        ast.parse(signature.strip() + " ...")
    except SyntaxError:
        return False
    return True


def _repair_def(line: str) -> str:
    fixed = re.sub(r"([(,]\s*)in(\s*:)", r"\1in_\2", line)
    if _valid(fixed):
        return fixed
    head, _, rest = fixed.partition("(")
    params, close, tail = rest.rpartition(")")
    parts, seen_default = [], False
    for part in params.split(", "):
        name = part.split(":")[0].strip()
        if "=" in part:
            seen_default = True
        elif seen_default and name not in ("*", "/") and not name.startswith("*"):
            part += " = ..."
        parts.append(part)
    return f"{head}({', '.join(parts)}{close}{tail}"


def repair(folder: Path) -> int:
    """Repair every .pyi under ``folder`` in place; returns the number of lines changed."""
    changed = 0
    for stub in folder.rglob("*.pyi"):
        lines = stub.read_text().splitlines(keepends=True)
        out = []
        for line in lines:
            new = line
            if line.strip() == "import tensorrt_libs as tensorrt_libs":
                new = ""
            elif line.lstrip().startswith("def ") and line.rstrip().endswith(":") and not _valid(line):
                new = _repair_def(line.rstrip("\n")) + "\n"
            changed += new != line
            out.append(new)
        stub.write_text("".join(out))
    return changed


def main() -> int:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade", "--target",
                    str(TARGET), VERSION], check=True)
    print(f"tensorrt-stubs in {TARGET}: repaired {repair(TARGET)} line(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
