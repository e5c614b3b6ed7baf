"""What a run cost: CPU-seconds, GPU-seconds, bytes read and written, peak memory, and money at the user's price.
No peer reports cost per stage; the only figures are quoted by hand (anchors_2026-12-04 §2.7).

    Price      ``--price cpu-hour=X,gpu-hour=Y``: per CPU-core-hour and per GPU-hour, in any one currency
    Meter      the accounting of one run, or of one step of a pipeline (``metered``; the innermost is current):
               wall seconds; this process's CPU-seconds (``getrusage``: user + system time of every thread);
               GPU-seconds: the wall seconds a local run on ``device="cuda"`` holds its GPU (its run.json says
               the device and the engine), or on Ray the seconds the GPU actors were held (``add_gpu_held``);
               the Ray tasks' own CPU-seconds (each task's ``time.process_time``, from its result:
               ``add_tasks``); the peak resident memory of this process and of the largest task
    usage      run.json's ``cost`` (``Meter.usage``): those numbers, the bytes the run read (its ``bytes_read``)
               and wrote (the files its output session recorded in OUT since the meter started), and the amount
               at the price

Peak memory is the process's peak so far (``ru_maxrss`` only grows): for a pipeline's later step it is the peak
of the steps before it too, and says so.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

from ..config import is_real
from ..errors import ConfigError

UNITS = {"cpu-hour": "cpu_hour", "gpu-hour": "gpu_hour"}


@dataclass(frozen=True)
class Price:
    """The user's price per CPU-core-hour and per GPU-hour (None: not given; one currency, the user's)."""

    cpu_hour: float | None = None
    gpu_hour: float | None = None

    def __post_init__(self) -> None:
        for name in ("cpu_hour", "gpu_hour"):
            v = getattr(self, name)
            if v is not None and not (is_real(v) and v >= 0):
                raise ConfigError(f"price {name.replace('_', '-')}={v!r}: a price must be a number >= 0")

    @classmethod
    def parse(cls, text: str) -> "Price":
        """``cpu-hour=0.04,gpu-hour=2.5`` (either may be left out).

        Raises:
            ConfigError: an unknown unit, a value that is no number, nothing given.
        """
        values: dict[str, float] = {}
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            unit, eq, value = part.partition("=")
            if not eq or unit.strip() not in UNITS:
                raise ConfigError(f"price={text!r}: write cpu-hour=PRICE,gpu-hour=PRICE (per CPU-core-hour and per "
                                  f"GPU-hour), got {part!r}")
            try:
                values[UNITS[unit.strip()]] = float(value)
            except ValueError:
                raise ConfigError(f"price={text!r}: {value!r} is no number") from None
        if not values:
            raise ConfigError(f"price={text!r}: give cpu-hour=PRICE and/or gpu-hour=PRICE")
        return cls(**values)

    def to_dict(self) -> dict[str, float | None]:
        return {"cpu_hour": self.cpu_hour, "gpu_hour": self.gpu_hour}


def _cpu_seconds() -> float:
    """This process's CPU time so far (user + system, every thread); 0.0 where the platform does not say."""
    try:
        import resource

        r = resource.getrusage(resource.RUSAGE_SELF)
        return float(r.ru_utime + r.ru_stime)
    except Exception:  # pragma: no cover - non-POSIX
        return time.process_time()


def peak_rss_bytes() -> int | None:
    """This process's peak resident memory so far, in bytes (None where the platform does not say: not POSIX).
    Linux reports KiB, macOS bytes."""
    try:
        import resource
        import sys

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak if sys.platform == "darwin" else peak * 1024)
    except Exception:  # pragma: no cover - non-POSIX
        return None


def _recorded() -> dict[str, frozenset[str]]:
    """The files every open output session has recorded so far (OUT -> relative paths)."""
    from .outputs import open_sessions

    return {k: frozenset(s.recorded) for k, s in open_sessions().items()}


@dataclass
class Meter:
    """One run's accounting (module docstring). ``price``: the user's, or None."""

    price: Price | None = None
    t0: float = field(default_factory=time.perf_counter)
    cpu0: float = field(default_factory=_cpu_seconds)
    task_cpu_s: float = 0.0
    task_seconds: float = 0.0
    tasks: int = 0
    gpu_held_s: float = 0.0
    gpu_busy_s: float = 0.0
    task_peak_rss: int = 0
    before: dict[str, frozenset[str]] = field(default_factory=_recorded)

    def add_tasks(self, results: list[Mapping[str, Any]], on_gpu: bool = False) -> None:
        """Count Ray tasks' own accounting (``cpu_seconds``, ``seconds``, ``peak_rss_bytes`` in each result; a
        result reused from an earlier run (``reused``) cost nothing now). ``on_gpu``: they ran on a GPU actor
        (their seconds are GPU busy time)."""
        for r in results:
            if r.get("reused"):
                continue
            self.tasks += 1
            self.task_cpu_s += float(r.get("cpu_seconds", 0.0))
            self.task_seconds += float(r.get("seconds", 0.0))
            if on_gpu:
                self.gpu_busy_s += float(r.get("seconds", 0.0))
            self.task_peak_rss = max(self.task_peak_rss, int(r.get("peak_rss_bytes", 0) or 0))

    def add_gpu_held(self, seconds: float, gpus: int) -> None:
        """GPUs held by workers (Ray's GPU actors) for ``seconds``."""
        self.gpu_held_s += seconds * gpus

    def usage(self, out: str | None = None, stats: Mapping[str, Any] | None = None,
              exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        """run.json's ``cost`` now: seconds, bytes, memory and the amount at the price (module docstring). ``stats``
        (the run's run.json so far): its ``bytes_read``, and its ``device`` and ``engine`` (a local run on "cuda"
        holds one GPU for its wall time; a Ray run's GPUs are its actors'). ``exclude``: files of OUT not counted
        as written (the statistics file being written)."""
        stats = stats or {}
        wall = time.perf_counter() - self.t0
        cpu_here = max(0.0, _cpu_seconds() - self.cpu0)
        local_gpu = stats.get("device") == "cuda" and (stats.get("engine") or {}).get("name") != "ray"
        gpu = (wall if local_gpu else 0.0) + self.gpu_held_s
        cpu = cpu_here + self.task_cpu_s
        read = sum(int(v) for v in (stats.get("bytes_read") or {}).values() if isinstance(v, (int, float)))
        u: dict[str, Any] = {
            "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
            "cpu_s_here": round(cpu_here, 3), "cpu_s_tasks": round(self.task_cpu_s, 3), "tasks": self.tasks,
            "gpu_s": round(gpu, 3), "gpu_busy_s_tasks": round(self.gpu_busy_s, 3),
            "bytes_read": read, "bytes_written": _written(out, self.before, exclude),
            "peak_rss_bytes": peak_rss_bytes(), "peak_rss_bytes_tasks": self.task_peak_rss or None,
            "device_pool_bytes": _device_pool_bytes(),
        }
        u["price"] = self.price.to_dict() if self.price is not None else None
        u["amount"] = amount(u, self.price)
        u["note"] = ("cpu_s: CPU-seconds (user + system) of this process and of its Ray tasks; gpu_s: seconds a GPU "
                     "was held (a local run on cuda: its wall time; Ray: the GPU actors' lifetime); bytes_written: "
                     "the files written into the output directory but this statistics file; peak_rss_bytes: this process's peak so far")
        return u


def amount(usage: Mapping[str, Any], price: Price | None) -> float | None:
    """cpu_s / 3600 x cpu-hour + gpu_s / 3600 x gpu-hour (the parts priced; None without a price)."""
    if price is None or (price.cpu_hour is None and price.gpu_hour is None):
        return None
    total = 0.0
    if price.cpu_hour is not None:
        total += usage["cpu_s"] / 3600.0 * price.cpu_hour
    if price.gpu_hour is not None:
        total += usage["gpu_s"] / 3600.0 * price.gpu_hour
    return total


def total(parts: list[Mapping[str, Any]], price: Price | None, wall: float) -> dict[str, Any]:
    """A pipeline's ``cost``: its steps' usages summed (peaks: the largest), over ``wall`` seconds."""
    keys = ("cpu_s", "cpu_s_here", "cpu_s_tasks", "tasks", "gpu_s", "gpu_busy_s_tasks", "bytes_read", "bytes_written")
    u: dict[str, Any] = {"wall_s": round(wall, 3)}
    for k in keys:
        u[k] = round(sum(p.get(k) or 0 for p in parts), 3) if k != "tasks" else sum(p.get(k) or 0 for p in parts)
    for k in ("peak_rss_bytes", "peak_rss_bytes_tasks", "device_pool_bytes"):
        vals = [p.get(k) for p in parts if p.get(k)]
        u[k] = max(vals) if vals else None
    u["price"] = price.to_dict() if price is not None else None
    u["amount"] = amount(u, price)
    return u


def _written(out: str | None, before: Mapping[str, frozenset[str]], exclude: tuple[str, ...] = ()) -> int:
    """Bytes of the files the output session of ``out`` recorded since ``before`` (0 without one), but the files
    ``exclude`` (relative to ``out``)."""
    from .outputs import open_sessions

    if out is None:
        return 0
    real = os.path.realpath(out)
    for key, s in open_sessions().items():
        if real == key or real.startswith(key + os.sep):
            n = 0
            skip = {os.path.realpath(os.path.join(out, e)) for e in exclude}
            for rel in s.recorded - before.get(key, frozenset()):
                if os.path.realpath(os.path.join(key, *rel.split("/"))) in skip:
                    continue
                try:
                    n += os.path.getsize(os.path.join(key, *rel.split("/")))
                except OSError:  # a temporary renamed away, a file removed again
                    continue
            return n
    return 0


def _device_pool_bytes() -> int | None:
    """The CuPy memory pool's size (its freed blocks stay cached, so about its peak); None without CuPy in use."""
    import sys

    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    try:
        return int(cupy.get_default_memory_pool().total_bytes()) or None
    except Exception:  # noqa: BLE001 - no device in this process
        return None


_METER: contextvars.ContextVar[Meter | None] = contextvars.ContextVar("gpu_dedup_meter", default=None)


def current() -> Meter | None:
    """The innermost meter (None outside any run)."""
    return _METER.get()


@contextlib.contextmanager
def metered(price: Price | None = None, *, fresh: bool = False) -> Iterator[Meter]:
    """A meter for the block: the current one (a program inside a pipeline step joins the step's), or with
    ``fresh`` (a pipeline's step) or none current, a new one. A ``price`` given joins a current meter without one."""
    m = _METER.get()
    if m is not None and not fresh:
        if price is not None and m.price is None:
            m.price = price
        yield m
        return
    m = Meter(price)
    token = _METER.set(m)
    try:
        yield m
    finally:
        _METER.reset(token)


def line(cost: Mapping[str, Any]) -> str:
    """One summary line: CPU- and GPU-hours, bytes, and the amount at the price."""
    from ..report.page import fmt_bytes

    text = (f"cost: {cost['cpu_s'] / 3600:.4f} CPU-hours, {cost['gpu_s'] / 3600:.4f} GPU-hours, read "
            f"{fmt_bytes(cost['bytes_read'])}, wrote {fmt_bytes(cost['bytes_written'])}")
    if cost.get("peak_rss_bytes"):
        text += f", peak memory {fmt_bytes(cost['peak_rss_bytes'])}"
    if cost.get("amount") is not None:
        text += f"; {cost['amount']:.4g} at the given price"
    return text
