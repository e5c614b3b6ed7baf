"""runtime/heartbeat.py: the lines that say what a long wait is doing (issue 36 item 11), on a clock the tests
move by hand."""
import itertools
import logging
import time

import pytest

from gpu_dedup.runtime import heartbeat
from gpu_dedup.runtime.heartbeat import Heartbeat, duration, phase, ticking

log = logging.getLogger("gpu_dedup.test_heartbeat")


@pytest.fixture
def clock(monkeypatch):
    """A clock that reads 0, 10, 20, ... seconds."""
    ticks = itertools.count()
    monkeypatch.setattr(heartbeat, "clock", lambda: next(ticks) * 10.0)


def _said(caplog):
    return [r.getMessage() for r in caplog.records if r.name == log.name]


def test_duration_as_people_say_it():
    assert [duration(s) for s in (0.4, 45, 119.4, 120, 7199, 7200, 36000)] == \
        ["0 s", "45 s", "119 s", "2 min", "120 min", "2.0 h", "10.0 h"]


def test_a_loop_says_it_starts_then_its_progress_every_period(clock, caplog):
    """Start line; a line only once HEARTBEAT_S (30 s) passed since the last, with the share done, the rate
    and the time left at that rate; none for no progress; past an estimated total, "so far"."""
    with caplog.at_level(logging.INFO, logger=log.name):
        with Heartbeat(log, "embedding", total=100, unit="documents") as beat:  # clock 0
            for _ in range(5):
                beat.update(10)  # clock 10, 20, 30, 40, 50: lines at 30 (30 s after 0), and not at 40 or 50
            beat.update(0)  # clock not even read
            beat.update(50)  # clock 60: 30 s after the last line
            beat.update(20)  # clock 70; 120 of an estimated 100
            beat.update(5)  # 80
            beat.update(5)  # 90: line
    assert _said(caplog) == ["embedding (100 documents) ...",
                             "embedding: 30 of 100 documents (1.0/s, about 70 s left)",
                             "embedding: 100 documents so far (1.7/s, 60 s)",
                             "embedding: 130 documents so far (1.4/s, 90 s)"]


def test_each_counts_the_items_and_no_total_says_so_far(clock, caplog):
    with caplog.at_level(logging.INFO, logger=log.name):
        got = list(Heartbeat(log, "reading", unit="batches", every=15).each("abcd"))
    assert got == list("abcd")
    assert _said(caplog) == ["reading ...", "reading: 2 batches so far (0.1/s, 20 s)",
                             "reading: 4 batches so far (0.1/s, 40 s)"]


def test_ticking_says_a_call_is_still_going_until_it_ends(monkeypatch, caplog):
    """A call that says nothing itself (a child process, Ray's start): the start line, then one line every
    period from a thread, none after the block."""
    monkeypatch.setattr(heartbeat, "HEARTBEAT_S", 0.02)
    with caplog.at_level(logging.INFO, logger=log.name):
        with ticking(log, "training"):
            time.sleep(0.2)
        n = len(_said(caplog))
        time.sleep(0.1)
    said = _said(caplog)
    assert said[0] == "training ..." and len(said) == n >= 3
    assert all(m.startswith("training: still going after ") and m.endswith(" s") for m in said[1:])


def test_phase_is_one_line():
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        phase(log, "writing %s", "x/")
    finally:
        log.removeHandler(handler)
    assert [r.getMessage() for r in records] == ["writing x/ ..."]
