"""The scale simulation's per-task probe (benchmarks/scale_simulation.py puts this folder on
PYTHONPATH). In every kfp.local task process, and only when AUTOCOMP_SCALE_PROBE names a folder,
it gives the task a temporary folder of its own (TMPDIR: what the components' scratch goes to),
polls the size of that folder and of the task's output artifacts together every 0.2 s, and at
exit writes one JSON record: the task (from its executor input), wall time, peak RSS, peak disk,
the final size of its output artifacts, and the bytes it moved to and from the S3 store
(autocomp.store.s3.TRAFFIC). Any other process is untouched.
"""

from __future__ import annotations

import contextlib
import os
import sys

_BASE = os.environ.get("AUTOCOMP_SCALE_PROBE")
_ARGV = getattr(sys, "orig_argv", [])


def _size(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file removed while counted
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _start() -> None:
    import atexit
    import json
    import resource
    import shutil
    import tempfile
    import threading
    import time

    executor = json.loads(_ARGV[_ARGV.index("--executor_input") + 1])
    task_dir = os.path.dirname(executor["outputs"]["outputFile"])
    task = os.path.basename(task_dir)
    where = os.path.basename(os.path.dirname(task_dir))
    scratch = os.path.join(_BASE, "tmp", str(os.getpid()))
    os.makedirs(scratch, exist_ok=True)
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    started, peak = time.time(), [0]

    def poll() -> None:  # scratch and the task's output artifacts together
        while True:
            peak[0] = max(peak[0], _size(scratch) + _size(task_dir))
            time.sleep(0.2)

    threading.Thread(target=poll, daemon=True, name="scale-probe").start()

    def report() -> None:
        peak[0] = max(peak[0], _size(scratch) + _size(task_dir))
        traffic = getattr(sys.modules.get("autocomp.store.s3"), "TRAFFIC", None) or {}
        record = {
            "task": task, "where": where, "pid": os.getpid(), "started": started,
            "wall_s": time.time() - started,
            "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "peak_disk": peak[0], "outputs": _size(task_dir),
            "read": traffic.get("read", 0), "written": traffic.get("written", 0),
            "requests": traffic.get("requests", 0),
        }  # fmt: skip
        folder = os.path.join(_BASE, "tasks")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{os.getpid()}.json"), "w") as f:
            json.dump(record, f)
        shutil.rmtree(scratch, ignore_errors=True)

    atexit.register(report)


if _BASE and "--executor_input" in _ARGV:
    _start()
