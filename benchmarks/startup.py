"""Process start-up in the local run: what each kfp.local task pays before and after its work.

kfp.local starts one Python process per pipeline task, so every task pays the interpreter, its
imports and its exit. This script measures, in one run, medians of `--repeats` fresh processes:

- import: wall time of `python -c "import M"` up to the end of the import, per module a task
  needs (kfp and the component modules for every task; torch, open_clip and transformers for the
  model tasks);
- exit: the time from the last statement to the process being gone (interpreter teardown,
  atexit hooks, the final garbage collection), also after `autocomp.process.ending()`, which the
  model tasks and the `autocomp` command call last;

and, with `--run DIR` (a folder `autocomp run` made), each task's executor phases from its log in
DIR/logs: start-up (task start to the executor's first line), work, and the task's wall time.

Usage: python benchmarks/startup.py [--repeats 3] [--run runs/demo]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

MODULES = (
    ("(bare interpreter)", ""),
    ("kfp", "kfp"),
    ("components: generation", "autocomp.pipelines.definitions.components.generation"),
    ("components: evaluation", "autocomp.pipelines.definitions.components.evaluation"),
    ("torch", "torch"),
    ("open_clip", "open_clip"),
    ("transformers", "transformers"),
    ("open_clip, then ending()", "open_clip; from autocomp.process import ending; ending()"),
)
PROBE = "import time, sys\n{imports}\nsys.stdout.write(repr(time.time()))\nsys.stdout.flush()\n"
STAMP = re.compile(r"^(\d\d:\d\d:\d\d\.\d+) - INFO - (Executing task|Task) '([^']+)'(.*)$")
EXECUTOR = re.compile(r"\[KFP Executor (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) ")


def probe(module: str) -> tuple[float, float]:
    """(seconds to the end of `import module`, seconds from there to the process's end)."""
    code = PROBE.format(imports=f"import {module}" if module else "")
    start = time.time()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    end = time.time()
    imported = float(done.stdout.strip())
    return imported - start, end - imported


def import_table(repeats: int) -> list[tuple[str, float, float]]:
    rows = []
    for label, module in MODULES:
        runs = [probe(module) for _ in range(repeats)]
        rows.append(
            (label, statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
        )
    return rows


def _clock(text: str) -> float:
    t = datetime.strptime(text, "%H:%M:%S.%f")
    return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6


def task_phases(run: Path) -> list[tuple[str, float, float, float]]:
    """(task log, start-up s, work s, wall s) for every task log of a local run."""
    rows = []
    for log in sorted((run / "logs").glob("*.log")):
        if log.name == "kfp.log":
            continue
        text = log.read_text(errors="replace").splitlines()
        stamps = [m for m in map(STAMP.match, text) if m]
        executor = [m for m in map(EXECUTOR.search, text) if m]
        if not stamps or not executor:
            continue
        begin = _clock(stamps[0].group(1))
        first = _clock(executor[0].group(1).split(" ")[1].replace(",", "."))
        last = _clock(executor[-1].group(1).split(" ")[1].replace(",", "."))
        ends = [_clock(m.group(1)) for m in stamps if "finished" in m.group(4)]
        end = ends[-1] if ends else last
        rows.append((log.stem, first - begin, last - first, end - begin))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--run", type=Path, default=None, help="a folder `autocomp run` made")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f}; {os.cpu_count()} CPUs; {sys.version.split()[0]}")
    rows = import_table(args.repeats)
    bare = rows[0][1]
    print(f"\n{'module':26} {'import s':>9} {'x bare':>7} {'exit s':>7}")
    for label, imported, exited in rows:
        print(f"{label:26} {imported:9.2f} {imported / bare:7.1f} {exited:7.2f}")
    if args.run:
        phases = task_phases(args.run)
        print(f"\n{'task':28} {'start-up s':>10} {'work s':>8} {'wall s':>8} {'start-up %':>10}")
        for name, startup, work, wall in phases:
            share = 100 * startup / wall if wall else 0.0
            print(f"{name:28} {startup:10.2f} {work:8.2f} {wall:8.2f} {share:10.0f}")
        total = sum(p[3] for p in phases)
        overhead = sum(p[1] for p in phases)
        print(f"\nall tasks: {total:.1f} s wall, {overhead:.1f} s before the executor's first line "
              f"({100 * overhead / total:.0f} %)")  # fmt: skip


if __name__ == "__main__":
    main()
