"""What kfp.local prints, kept out of the terminal and filed per task: `<logs>/<task>.log` for
each task run (its executor's output: the subprocess's stdout and stderr, which kfp.local copies
line by line with print()), and `<logs>/kfp.log` for the whole raw stream.

kfp.local 2.17 announces a task with `logging.info("Executing task ...")` and its end with
`"Task ... finished with status ..."`, but under dsl.ParallelFor it runs loop iterations in
threads that swap the root logger's handlers in and out of each other's way, so the end line of
a concurrent task can be lost (a demo run printed one of its two validate ends). The events
therefore come from kfp.local's own per-task entry point,
`kfp.local.orchestrator.task_executor.execute_single_task` (every orchestrator calls it, with
retries and the cache inside), wrapped for the run: its return status is the task's state, and
the thread that runs it is the thread that prints the task's output, which routes every write
to the right log while iterations run side by side.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import io
import logging
import re
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from autocomp.pipelines.local.taskview import TaskView, Ticker

# Warnings that carry no information in a local run: the images are not used (each task runs
# in this Python; a local build does not even resolve them), and the cluster's resource
# requests are ignored by design.
LOCAL_NOISE = (
    r"Task '.*': settings \[.*\] have no effect in the current local runner",
    r"You may be attemping to run a task that uses custom or non-Python base image",
)


class TaskLogs:
    """The logs folder of one run: kfp.log (everything) and one file per task run."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.log"):  # a resumed run starts its logs afresh
            old.unlink()
        self.raw = (folder / "kfp.log").open("w", encoding="utf-8")
        self.names: set[str] = set()
        self.lock = threading.Lock()

    def new(self, label: str) -> tuple[str, Path]:
        """A unique task label (a repeated name gets -2, -3, ...) and its log file."""
        stem = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "task"
        with self.lock:
            unique, i = stem, 1
            while unique in self.names or unique == "kfp":
                i += 1
                unique = f"{stem}-{i}"
            self.names.add(unique)
        return unique, self.folder / f"{unique}.log"

    def close(self) -> None:
        self.raw.close()


class Router(io.TextIOBase):
    """sys.stdout / sys.stderr during the run: every write goes to kfp.log, and to the log of the
    task the writing thread runs (if any)."""

    def __init__(self, logs: TaskLogs) -> None:
        self.logs = logs
        self.local = threading.local()
        self.lock = threading.Lock()

    def task_log(self) -> TextIO | None:
        return getattr(self.local, "log", None)

    def attach(self, log: TextIO | None) -> None:
        self.local.log = log

    def write(self, text: str) -> int:
        plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
        with self.lock:
            self.logs.raw.write(plain)
            self.logs.raw.flush()
        log = self.task_log()
        if log is not None and not log.closed:
            log.write(plain)
            log.flush()
        return len(text)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


def _task_label(step: str, arguments: dict[str, Any], resource: str) -> str:
    """A task's label: its step, with the model it scores or the loop iteration it is."""
    if isinstance(arguments.get("model"), str):
        return f"{step}-{arguments['model']}"
    found = re.findall(r"-iteration-(\d+)", resource)
    return f"{step}-{found[-1]}" if found else step


def _arguments(task_spec: Any, io_store: Any) -> dict[str, Any]:
    """The task's resolved inputs, as kfp.local resolves them (empty when that fails)."""
    try:
        from kfp.local.orchestrator.orchestrator_utils import OrchestratorUtils

        return dict(OrchestratorUtils.make_task_arguments(task_spec.inputs, io_store))
    except Exception:  # noqa: BLE001  (a label only: the task itself reports real errors)
        return {}


def _watched(
    original: Any, view: TaskView, logs: TaskLogs, router: Router, print_function: Any = print
) -> Any:
    """kfp.local's execute_single_task, reporting each task to the view and its log.
    `print_function`: the real print, put back before each task (kfp.local indents a task's
    output by patching print, and concurrent tasks leave each other's patches stacked)."""
    from kfp.local import status

    signature = inspect.signature(original)

    def execute_single_task(*args: Any, **kwargs: Any) -> Any:
        given = signature.bind(*args, **kwargs).arguments
        spec = given["task_spec"]
        step = spec.task_info.name or given["task_name"]
        arguments = _arguments(spec, given["io_store"])
        label, path = logs.new(_task_label(step, arguments, given["pipeline_resource_name"]))
        key = object()
        ok = False
        with path.open("w", encoding="utf-8") as log:
            builtins.print = print_function
            view.start(key, label, step, path)
            router.attach(log)
            try:
                outputs, task_status = original(*args, **kwargs)
                ok = task_status == status.Status.SUCCESS
                return outputs, task_status
            except BaseException:
                router.write(traceback.format_exc())
                raise
            finally:
                router.attach(None)
                view.finish(key, ok)

    return execute_single_task


def _show_warning(router: Router, counted: list[str]) -> Any:
    def show(message: Any, category: Any, filename: str, lineno: int, *_: Any) -> None:
        counted.append(str(message))
        router.write(warnings.formatwarning(message, category, filename, lineno))

    return show


@contextlib.contextmanager
def captured(logs_dir: Path, view: TaskView) -> Iterator[dict[str, Any]]:
    """Run kfp.local inside: its output goes to the logs, its task events to `view`. Yields a
    dict whose "warnings" lists the warnings raised in this process meanwhile (they are in
    kfp.log). Restores stdout, stderr, print, the root logger and the warning filters."""
    from kfp.local.orchestrator import task_executor

    logs = TaskLogs(logs_dir)
    router = Router(logs)
    original = task_executor.execute_single_task
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    print_function = builtins.print  # kfp.local's indented_print can leave print patched
    streams = sys.stdout, sys.stderr
    found: dict[str, Any] = {"warnings": []}
    with warnings.catch_warnings():
        for pattern in LOCAL_NOISE:
            warnings.filterwarnings("ignore", message=pattern)
        warnings.showwarning = _show_warning(router, found["warnings"])
        task_executor.execute_single_task = _watched(original, view, logs, router, print_function)
        sys.stdout = sys.stderr = router
        try:
            with Ticker(view):
                yield found
        finally:
            sys.stdout, sys.stderr = streams
            task_executor.execute_single_task = original
            builtins.print = print_function
            root.handlers[:] = handlers
            root.setLevel(level)
            logs.close()


def log_tail(path: Path, lines: int = 20) -> list[str]:
    """The last `lines` lines of a log (fewer when it is shorter)."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    kept = [line.rstrip() for line in text.splitlines() if line.strip().strip("-")]
    return kept[-lines:]  # blank lines and kfp's horizontal rules left out
