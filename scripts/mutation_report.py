"""Summarize a mutmut run; scripts/mutation.sh runs it in its work folder with the venv's Python.

Prints killed/total, then every mutant not killed with its status and diff, each labelled:
- ``message``: only string literals change (mutmut's "XX" wrap, a case change, a literal replaced by None): the
  wording of an error or log message (tests match the part of a message a user relies on, not every word);
- ``log``: a change inside a logging call (what is logged, not what is computed);
- ``logic``: anything else (an operator, a constant, a removed argument, ...): a test should kill it.
The score is given for all mutants and for the logic ones alone (message and log mutants left out, killed or not).
"""
from __future__ import annotations

import re
from collections import Counter

from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files


def changed_lines(diff: str) -> tuple[list[str], list[str]]:
    """(removed, added) code lines of a unified diff, headers excluded."""
    lines = diff.splitlines()
    removed = [line[1:] for line in lines if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
    return removed, added


_STRING = re.compile(r"""[rbfRBF]{0,2}("[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')""")


def _without_text(line: str) -> str:
    """The line with every string literal and ``None`` replaced by one placeholder."""
    return re.sub(r"\bNone\b", "S", _STRING.sub("S", line))


def kind_of(diff: str) -> str:
    """'message' when only string literals change (an "XX" wrap, a case change, or a literal replaced by None: the
    wording of an error or log message); 'log' when the change sits in a logging call; else 'logic'."""
    removed, added = changed_lines(diff)
    if removed and len(removed) == len(added) and all(
            _without_text(old) == _without_text(new) for old, new in zip(removed, added)):
        return "message"
    if any(re.search(r"\blog\.(debug|info|warning)\(", line) for line in removed):
        return "log"
    return "logic"


def main() -> None:
    statuses: dict[str, str] = {}
    paths = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        for name, code in data.exit_code_by_key.items():
            statuses[name] = status_by_exit_code[code]
            paths[name] = path
    diffs = {name: get_diff_for_mutant(name, path=paths[name]) for name in statuses}
    kinds = {name: kind_of(diff) for name, diff in diffs.items()}
    survivors = [name for name, status in statuses.items() if status != "killed"]
    for label, names in (("all", list(statuses)), ("logic", [n for n in statuses if kinds[n] == "logic"])):
        killed = sum(statuses[n] == "killed" for n in names)
        print(f"{label}: killed {killed} / {len(names)} ({100 * killed / max(len(names), 1):.1f}%)")
    print("not killed, by status:", dict(Counter(statuses[n] for n in survivors)))
    for name in sorted(survivors, key=lambda n: (kinds[n], n)):
        removed, added = changed_lines(diffs[name])
        print(f"\n[{kinds[name]}] {statuses[name]}: {name}")
        for old, new in zip(removed, added):
            print(f"  - {old.strip()}\n  + {new.strip()}")
        for extra in removed[len(added):]:
            print(f"  - {extra.strip()}")
        for extra in added[len(removed):]:
            print(f"  + {extra.strip()}")


if __name__ == "__main__":
    main()
