"""Summarize a mutmut run; scripts/mutation.sh runs it in its work folder with the venv's Python.

Prints killed/total (a mutant on which the tests time out counts as killed), then every mutant not killed with its
status and diff, each labelled by comparing the syntax trees of the original and the mutated function:
- ``log``: every change sits inside a logging call (what is logged, not what is computed), on any line of it;
- ``message``: every change rewords a message: a string literal holding words (a space) changed (mutmut's "XX"
  wrap, a case change) or replaced by None (tests match the part of a message a user relies on, not every word);
- ``logic``: anything else (an operator, a constant, a removed argument, and string literals without a space:
  op names, attribute and dict keys such as "Shape" or "axis"): a test should kill it.
The score is given for all mutants and for the logic ones alone (message and log mutants left out, killed or not).
"""
from __future__ import annotations

import ast
import difflib
import functools
import re
import textwrap
from collections import Counter
from pathlib import Path

import libcst as cst

from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import (read_functions_from_index, read_mutant_function, read_mutants_module,
                                        read_original_function)
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files


def changed_lines(diff: str) -> tuple[list[str], list[str]]:
    """(removed, added) code lines of a unified diff, headers excluded."""
    lines = diff.splitlines()
    removed = [line[1:] for line in lines if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
    return removed, added


@functools.lru_cache(maxsize=None)
def _mutants_module(path: Path) -> cst.Module:
    return read_mutants_module(path)  # parsed once per file, not once per mutant


def function_sources(name: str, path: Path) -> tuple[str, str]:
    """(original, mutant) source of the function a mutant changes, whole (not the diff's three lines of context)."""
    functions = read_functions_from_index(name, path)
    if functions is None:
        module = _mutants_module(path)
        functions = (read_original_function(module, name), read_mutant_function(module, name))
    original, mutant = (cst.Module([function]).code for function in functions)
    return original, mutant


def diff_of(original: str, mutant: str) -> str:
    """The unified diff of a function and its mutant (what mutmut shows)."""
    return "\n".join(difflib.unified_diff(original.strip().split("\n"), mutant.strip().split("\n"), lineterm=""))


Change = tuple[ast.AST, "ast.AST | None", tuple[ast.AST, ...]]


def _differences(old: ast.AST, new: ast.AST, parents: tuple[ast.AST, ...] = ()) -> list[Change]:
    """The smallest differing (old node, new node or None, old node's ancestors) pairs of two syntax trees."""
    if type(old) is not type(new):
        return [(old, new, parents)]
    found = []
    for field, old_value in ast.iter_fields(old):
        new_value = getattr(new, field, None)
        if isinstance(old_value, list) and isinstance(new_value, list):
            if len(old_value) != len(new_value):  # an argument or element removed: the list's owner differs
                return [(old, new, parents)]
            pairs = list(zip(old_value, new_value))
        else:
            pairs = [(old_value, new_value)]
        for a, b in pairs:
            if isinstance(a, ast.AST) and isinstance(b, ast.AST):
                found += _differences(a, b, (*parents, old))
            elif isinstance(a, ast.AST) or isinstance(b, ast.AST) or a != b:
                if isinstance(a, ast.AST):
                    return found + [(a, None, (*parents, old))]
                return [(old, new, parents)]
    return found


_LOG_CALL = re.compile(r"^(log|logger|LOGGER|LOG|logging)\.(debug|info|warning|error|exception)$")


def _is_log_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and bool(_LOG_CALL.match(ast.unparse(node.func)))


def _text(node: ast.AST | None) -> str | None:
    """The literal text of a string constant or f-string (its literal parts), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return None


def kind_of(original: str, mutant: str) -> str:
    """'log' when every change sits inside a logging call (what is logged, not what is computed); 'message' when
    every change rewords a message: a string literal holding words (with a space) changed, or replaced by None; else
    'logic' (an operator, a constant, a removed argument, an op name or attribute key such as "Shape" or "axis")."""
    changes = _differences(ast.parse(textwrap.dedent(original)), ast.parse(textwrap.dedent(mutant)))
    if not changes:
        return "logic"
    if all(any(_is_log_call(p) for p in (*parents, old)) for old, _, parents in changes):
        return "log"

    def rewords(old: ast.AST, new: ast.AST | None, parents: tuple[ast.AST, ...]) -> bool:
        literal = next((n for n in (old, *reversed(parents)) if _text(n) is not None), None)
        if literal is None or not re.search(r"\s", _text(literal) or ""):
            return False
        return new is None or _text(new) is not None or (isinstance(new, ast.Constant) and new.value is None) \
            or isinstance(old, ast.Constant)

    return "message" if all(rewords(*change) for change in changes) else "logic"


_DETECTED = ("killed", "timeout")  # a mutant that makes the tests hang is caught too (by the time limit)


def main() -> None:
    statuses: dict[str, str] = {}
    paths = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, code in data.exit_code_by_key.items():
            statuses[name] = status_by_exit_code[code]
            paths[name] = path
    sources = {name: function_sources(name, Path(paths[name])) for name in statuses}
    kinds = {name: kind_of(*sources[name]) for name in statuses}
    survivors = [name for name, status in statuses.items() if status not in _DETECTED]
    for label, names in (("all", list(statuses)), ("logic", [n for n in statuses if kinds[n] == "logic"])):
        killed = sum(statuses[n] in _DETECTED for n in names)
        print(f"{label}: killed {killed} / {len(names)} ({100 * killed / max(len(names), 1):.1f}%)")
    print("timeouts (the tests hung on the mutant; counted as killed):",
          sum(status == "timeout" for status in statuses.values()))
    print("not killed, by status:", dict(Counter(statuses[n] for n in survivors)))
    for name in sorted(survivors, key=lambda n: (kinds[n], n)):
        removed, added = changed_lines(diff_of(*sources[name]))
        print(f"\n[{kinds[name]}] {statuses[name]}: {name}")
        for old, new in zip(removed, added):
            print(f"  - {old.strip()}\n  + {new.strip()}")
        for extra in removed[len(added):]:
            print(f"  - {extra.strip()}")
        for extra in added[len(removed):]:
            print(f"  + {extra.strip()}")


if __name__ == "__main__":
    main()
