"""Log lines that say what a long wait is doing: no phase of a few seconds or more passes in silence (a
progress bar that moves once per 64 MB batch, a model that loads, outputs being written, a library's own
training loop).

    phase(log, what)                   one INFO line as a long phase starts: "what ..."
    Heartbeat(log, what, total, unit)  a long loop's progress, every ``HEARTBEAT_S`` seconds:
                                       "what: 1,234 of 5,000 documents (41/s, about 2 min left)"
                                       (no total: "what: 1,234 documents so far (41/s)")
    ticking(log, what)                 the same for one call that reports nothing itself (fastText's training,
                                       a Ray cluster's start): "what: still going after 30 s"

The lines are INFO records of the caller's module logger (``-q`` hides them with the bars; the CLI's handler
writes them above a bar). ``clock`` is the module's monotonic clock, replaced in tests.
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")
HEARTBEAT_S = 30.0  # seconds between two progress lines of one loop or call
clock: Callable[[], float] = time.monotonic


def duration(seconds: float) -> str:
    """A duration as people say it: "45 s", "12 min", "3.5 h"."""
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"


def phase(log: logging.Logger, what: str, *args: object) -> None:
    """One line as a long phase starts (``what`` % ``args``, then "...")."""
    log.info(what + " ...", *args)


class Heartbeat:
    """A long loop's progress line every ``every`` seconds (``update`` after each step of work; cheap between
    lines: one clock read). ``total`` (None: unknown) gives the share done and the time left at the rate so
    far. A context manager: entering it starts the clock and, with ``start``, says the phase starts."""

    def __init__(self, log: logging.Logger, what: str, total: float | None = None, unit: str = "documents",
                 every: float | None = None, start: bool = True) -> None:
        self.log, self.what, self.total, self.unit, self.start = log, what, total, unit, start
        self.every = HEARTBEAT_S if every is None else every
        self.done = 0.0
        self.t0 = self.last = 0.0

    def __enter__(self) -> "Heartbeat":
        self.t0 = self.last = clock()
        if self.start:
            phase(self.log, "%s%s", self.what, f" ({self.total:,.0f} {self.unit})" if self.total else "")
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def each(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, one at a time, within this heartbeat: one unit done as the next is asked for."""
        with self:
            for item in items:
                yield item
                self.update(1)

    def update(self, n: float = 1) -> None:
        """``n`` more units done; a line when ``every`` seconds have passed since the last one (not for no
        progress)."""
        self.done += n
        if n <= 0:
            return
        now = clock()
        if now - self.last >= self.every:
            self.last = now
            self.log.info("%s", self.line(now))

    def line(self, now: float) -> str:
        """The progress line at time ``now``."""
        spent = max(now - self.t0, 1e-9)
        rate = self.done / spent
        speed = f"{rate:,.1f}/s" if rate < 10 else f"{rate:,.0f}/s"
        if not self.total or self.done >= self.total:  # (an estimated total can be passed)
            return f"{self.what}: {self.done:,.0f} {self.unit} so far ({speed}, {duration(spent)})"
        left = f", about {duration((self.total - self.done) / rate)} left" if rate > 0 else ""
        return f"{self.what}: {self.done:,.0f} of {self.total:,.0f} {self.unit} ({speed}{left})"


@contextmanager
def ticking(log: logging.Logger, what: str, every: float | None = None) -> Iterator[None]:
    """Say ``what`` as the block starts, then "what: still going after N s" every ``every`` seconds (default
    ``HEARTBEAT_S``) until it ends (a daemon thread: for one call that reports no progress itself and releases
    the GIL while it runs: a child process, a library's C++ loop)."""
    every = HEARTBEAT_S if every is None else every
    phase(log, "%s", what)
    stop = threading.Event()
    t0 = clock()

    def beat() -> None:
        while not stop.wait(every):
            log.info("%s: still going after %s", what, duration(clock() - t0))

    thread = threading.Thread(target=beat, name="gpu_dedup-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
