"""The package layering: graph rewrites (``passes``) never import the backend or the doctor; the backend uses the passes
and never the doctor; the doctor sits outside both; no import circle; ``cli`` and ``compile`` on top; the op
contract (``ops.spec``) sits below the torch side of the ops. Read from the sources (every import statement, at any
depth)."""
from __future__ import annotations

import ast
from pathlib import Path

import torchtrt_ext

PACKAGE = Path(torchtrt_ext.__file__).resolve().parent  # the sources imported: the checkout's, or an installed wheel's


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[str, str | None]]:
    """(imported module, enclosing function or None) for every import in ``path``; ``from a import b`` counts as
    ``a.b`` when ``a.b`` is a module of the package."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, str | None]] = []

    def visit(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Import):
                found.extend((alias.name, function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module:
                for alias in child.names:
                    sub = f"{child.module}.{alias.name}"
                    is_module = (PACKAGE.parent / sub.replace(".", "/")).with_suffix(".py").is_file() or \
                        (PACKAGE.parent / sub.replace(".", "/")).is_dir()
                    found.append((sub if is_module else child.module, function))
            visit(child, inner)

    visit(tree, None)
    return found


def _package_imports(package: str) -> dict[str, list[tuple[str, str | None]]]:
    root = PACKAGE / package
    return {_module_name(p): [(m, f) for m, f in imports(p) if m.startswith("torchtrt_ext")]
            for p in sorted(root.rglob("*.py"))}


def _within(module: str, *packages: str) -> bool:
    return any(module == p or module.startswith(f"{p}.") for p in packages)


def _module_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at any depth of the file: a function-level import counts)."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = set()
        for target, _ in imports(path):
            while target not in modules and "." in target:  # ``from m import name`` -> m
                target = target.rsplit(".", 1)[0]
            if target in modules and target != module:
                graph[module].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each one holds an import circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_rewrite_package_imports_neither_the_backend_nor_the_doctor() -> None:
    allowed = ("torchtrt_ext.passes", "torchtrt_ext.ops", "torchtrt_ext.errors")
    found = {(module, target, function) for module, targets in _package_imports("passes").items()
             for target, function in targets if not _within(target, *allowed)}
    assert found == set()


def test_the_backend_uses_the_passes_and_never_the_doctor() -> None:
    found = {target for targets in _package_imports("backend").values() for target, _ in targets}
    assert any(_within(t, "torchtrt_ext.passes") for t in found)  # backend -> passes: the one direction
    assert not any(_within(t, "torchtrt_ext.doctor", "torchtrt_ext.cli", "torchtrt_ext.runtime") for t in found)


def test_the_doctor_lives_outside_both_packages() -> None:
    assert (PACKAGE / "doctor" / "__init__.py").is_file() and not (PACKAGE / "doctor.py").exists()
    assert not any((PACKAGE / "passes" / name).exists() for name in ("trt_op_support.py", "nms_patterns.py"))
    targets = {t for targets in _package_imports("doctor").values() for t, _ in targets}
    assert any(_within(t, "torchtrt_ext.backend") for t in targets) and any(_within(t, "torchtrt_ext.passes")
                                                                             for t in targets)


def test_the_op_contract_stands_below_the_torch_side() -> None:
    """``ops.spec`` (what an op is) needs only the errors; ``ops._torch_op`` (how torch calls it) builds on it; the passes
    and the backend read ops through the contract, never the torch side."""
    spec = {t for t, _ in imports(PACKAGE / "ops" / "spec.py") if t.startswith("torchtrt_ext")}
    assert spec == {"torchtrt_ext.errors"}
    assert "torchtrt_ext.ops.spec" in {t for t, _ in imports(PACKAGE / "ops" / "_torch_op.py")}
    readers = {t for package in ("passes", "backend") for targets in _package_imports(package).values()
               for t, _ in targets}
    assert "torchtrt_ext.ops.spec" in readers and "torchtrt_ext.ops._torch_op" not in readers


def test_no_import_circle_among_the_modules() -> None:
    assert _circles(_module_graph()) == []


def test_nothing_below_imports_the_cli_or_compile() -> None:
    """``cli`` and ``compile`` sit on top: only the package root and the CLI itself may import them."""
    tops = ("torchtrt_ext.cli", "torchtrt_ext.compile")
    found = {(module, target) for module, targets in _module_graph().items() for target in targets
             if _within(target, *tops) and not _within(module, "torchtrt_ext.cli") and module != "torchtrt_ext"}
    assert found == set()


def test_the_walker_sees_what_it_is_given(tmp_path: Path) -> None:
    """The scan itself: a function-level import is found, with its function; a circle is found."""
    source = tmp_path / "sample.py"
    source.write_text("import os\nfrom torchtrt_ext.passes import cleanup\n\n\n"
                      "def late() -> None:\n    from torchtrt_ext import doctor\n")
    assert imports(source) == [("os", None), ("torchtrt_ext.passes.cleanup", None), ("torchtrt_ext.doctor", "late")]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []
