"""Progress on stderr for steps a user waits on (export, build phases, benchmark runs).

Lines, not a redrawn bar: they read the same in a terminal, a CI log and a redirected file. A counter prints at most
one line per ``INTERVAL_S`` seconds, and its last step when it printed before; a ticker prints the elapsed time every ``TICK_S`` seconds
while a step without steps of its own (an export) runs.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

PREFIX = "[torchtrt_ext]"
INTERVAL_S = 2.0
TICK_S = 5.0


class Counter:
    """``label: i/total`` on ``stream`` once ``INTERVAL_S`` has passed since the start or the last line, and at the
    last step when a line was printed before (a quick step prints nothing); ``enabled=False`` prints nothing."""

    def __init__(self, label: str, total: int, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.label, self.total, self.enabled = label, total, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self._last = time.monotonic()
        self._printed = False

    def step(self, count: int = 1) -> None:
        """Count ``count`` finished steps."""
        self.done += count
        now = time.monotonic()
        if self.enabled and (now - self._last >= INTERVAL_S or (self.done >= self.total and self._printed)):
            self._last, self._printed = now, True
            print(f"{PREFIX} {self.label}: {self.done}/{self.total}", file=self.stream, flush=True)


@contextlib.contextmanager
def ticking(label: str, *, enabled: bool = True, stream: TextIO | None = None) -> Iterator[None]:
    """Print ``label ...``, then the elapsed seconds every ``TICK_S`` until the block ends, then ``done``."""
    out = stream if stream is not None else sys.stderr
    if not enabled:
        yield
        return
    started = time.monotonic()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(TICK_S):
            print(f"{PREFIX} {label}: {time.monotonic() - started:.0f} s", file=out, flush=True)

    print(f"{PREFIX} {label} ...", file=out, flush=True)
    thread = threading.Thread(target=tick, name="torchtrt_ext-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    print(f"{PREFIX} {label} done ({time.monotonic() - started:.1f} s)", file=out, flush=True)
