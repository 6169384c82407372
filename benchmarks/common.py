"""What every benchmark shares: what the machine was doing while it ran, interleaved timing of
its paths, and the check that it runs the shape it prints.

The development machine's cores are shared with other people's builds, which can run in other
process namespaces (invisible to `ps`): the load average alone does not say how much of the
CPU a benchmark had. `Meter` records, for a span, the load average at both ends and the cores
that *other* processes kept busy meanwhile: the busy time of every CPU (/proc/stat) less this
process's and its waited-for children's CPU time (getrusage), divided by the wall time. Where
/proc/stat is missing (not Linux) only the load average is kept.

`interleave` runs several paths in turn, repeat after repeat, so that a change of load hits
every path alike, and keeps each run's time, result and meter reading; figures are medians.

`require` stops a benchmark, before it times anything, when what it would print (an image-token
count, a candidate count, a tensor shape) is not what it runs.
"""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _busy_seconds() -> float | None:
    """CPU seconds every core has been busy since boot (user, nice, system, irq, softirq,
    steal), or None without /proc/stat."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / TICK


def _own_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclass
class Reading:
    """One span: wall seconds, load average (1 min) at start and end, other processes' cores."""

    wall: float
    load: tuple[float, float]
    others: float | None


class Meter:
    """Start on creation; `stop()` gives the span's Reading."""

    def __init__(self) -> None:
        self.t0, self.load0 = time.perf_counter(), os.getloadavg()[0]
        self.busy0, self.own0 = _busy_seconds(), _own_seconds()

    def stop(self) -> Reading:
        wall = time.perf_counter() - self.t0
        busy = _busy_seconds()
        others = None
        if busy is not None and self.busy0 is not None and wall > 0:
            others = max(0.0, (busy - self.busy0) - (_own_seconds() - self.own0)) / wall
        return Reading(wall, (self.load0, os.getloadavg()[0]), others)


@dataclass
class Runs:
    """Every run of one path: its readings and its last result."""

    readings: list[Reading] = field(default_factory=list)
    result: Any = None

    @property
    def median(self) -> float:
        return statistics.median(r.wall for r in self.readings)

    @property
    def walls(self) -> str:
        return " ".join(f"{r.wall:.2f}" for r in self.readings)

    @property
    def others(self) -> float | None:
        values = [r.others for r in self.readings if r.others is not None]
        return statistics.median(values) if values else None


def interleave(paths: dict[str, Callable[[], Any]], repeats: int) -> dict[str, Runs]:
    """Each path once per repeat, in turn; every run timed and metered."""
    runs = {name: Runs() for name in paths}
    for _ in range(repeats):
        for name, fn in paths.items():
            meter = Meter()
            runs[name].result = fn()
            runs[name].readings.append(meter.stop())
    return runs


def load_text(runs: dict[str, Runs] | list[Reading]) -> str:
    """'load average 1.2-3.4, other processes 0.8 of 2 cores (median)' over every reading."""
    readings = (
        [r for v in runs.values() for r in v.readings] if isinstance(runs, dict) else list(runs)
    )
    loads = [x for r in readings for x in r.load]
    others = [r.others for r in readings if r.others is not None]
    text = f"load average {min(loads):.1f}-{max(loads):.1f}"
    if others:
        text += f", other processes busy {statistics.median(others):.1f} of {cores()} cores"
    return text


def others_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "CPU model unknown"


class ShapeError(SystemExit):
    """A benchmark would print a shape it does not run (exit status 3)."""


def require(ok: bool, what: str) -> None:
    """Stop with one line naming the shape when `ok` is false (kept under python -O)."""
    if not ok:
        print(f"benchmark shape check failed: {what}", flush=True)
        raise ShapeError(3)
