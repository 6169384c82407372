"""The live view of a local run: one line per pipeline task (waiting, running with its elapsed
time, done, failed, skipped).

On a terminal each pipeline's block is redrawn in place (ANSI) and frozen when the pipeline
ends. Elsewhere (a pipe, a CI log) every change is one line: a task's end always, its start
once it has run for `START_AFTER` seconds (a step that ends sooner prints only its end line, so
a log names what is running when something hangs without listing every sub-second step twice).
No kfp here: autocomp.pipelines.local.capture feeds the view with the events of kfp.local.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

WAITING, RUNNING, DONE, FAILED, SKIPPED = "waiting", "running", "done", "failed", "skipped"
START_AFTER = 10.0  # seconds a task runs before a log (not a terminal) says it is running
LABEL_WIDTH = 26


@dataclass
class Row:
    """One task of a pipeline. `step` is its name in the pipeline (a waiting row stands for the
    step; the first run of the step takes the row, later runs of it, e.g. loop iterations, get
    rows of their own beneath)."""

    label: str
    step: str
    state: str = WAITING
    started: float | None = None
    ended: float | None = None
    log: Path | None = None
    announced: bool = False


@dataclass
class Block:
    """One pipeline's rows."""

    name: str
    rows: list[Row] = field(default_factory=list)
    started: float = 0.0
    ended: float | None = None
    ok: bool | None = None


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 60 else f"{int(value) // 60} min {int(value) % 60:02d} s"


def _terminal_size() -> tuple[int, int]:
    size = shutil.get_terminal_size((100, 40))
    return size.columns, size.lines


class TaskView:
    """The state machine and its two renderings (terminal, log). Thread-safe: kfp.local runs
    loop iterations in threads, and a ticker redraws elapsed times."""

    def __init__(
        self,
        stream: TextIO,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        size: Callable[[], tuple[int, int]] | None = None,
    ) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.clock = clock
        self.size = size or _terminal_size
        self.blocks: list[Block] = []
        self.by_key: dict[object, Row] = {}
        self.lock = threading.RLock()
        self.drawn = 0  # terminal: lines of the live block now on screen

    # ------------------------------------------------------------------ events
    def pipeline(self, name: str, steps: list[str], note: str = "") -> None:
        """A pipeline starts; `steps`: its tasks in order (shown waiting)."""
        with self.lock:
            self.blocks.append(Block(name, [Row(s, s) for s in steps], started=self.clock()))
            if not self.tty:
                self._line(f"{name}{f' ({note})' if note else ''}")
            self._draw()

    def start(self, key: object, label: str, step: str, log: Path | None = None) -> None:
        """A task (`key`: its identity) of step `step` starts, shown as `label`."""
        with self.lock:
            block = self.blocks[-1]
            row = next((r for r in block.rows if r.step == step and r.state == WAITING), None)
            if row is None:  # another run of a step (a loop iteration): a row beneath its kin
                row = Row(label, step)
                kin = [i for i, r in enumerate(block.rows) if r.step == step]
                block.rows.insert(kin[-1] + 1 if kin else len(block.rows), row)
            row.label, row.state, row.started, row.log = label, RUNNING, self.clock(), log
            self._order(block, step)
            self.by_key[key] = row
            self._draw()

    def finish(self, key: object, ok: bool) -> None:
        """The task `key` ended, successfully or not."""
        with self.lock:
            row = self.by_key[key]
            row.state, row.ended = (DONE if ok else FAILED), self.clock()
            if not self.tty:
                self._line(self._row_text(row, plain=True))
            self._draw()

    def end_pipeline(self, ok: bool) -> None:
        """The pipeline ended: steps that never ran are skipped; the block is frozen."""
        with self.lock:
            block = self.blocks[-1]
            block.ended, block.ok = self.clock(), ok
            skipped = [r for r in block.rows if r.state == WAITING]
            for row in skipped:
                row.state = SKIPPED
            if self.tty:
                self._draw()
                self.drawn = 0  # frozen: the next block is drawn below it
            else:
                if skipped:
                    self._line(self._skipped_text(skipped, ok))
                self._line(self._header(block))

    def tick(self) -> None:
        """Time passed: redraw the elapsed times (terminal) or say which long task runs (log)."""
        with self.lock:
            if self.tty:
                self._draw()
                return
            now = self.clock()
            for block in self.blocks:
                for row in block.rows:
                    waited = now - (row.started or now)
                    if row.state == RUNNING and not row.announced and waited >= START_AFTER:
                        row.announced = True
                        self._line(self._row_text(row, plain=True))

    @staticmethod
    def _order(block: Block, step: str) -> None:
        """A step's rows in label order (render-2 before render-10), whoever started first."""
        places = [i for i, r in enumerate(block.rows) if r.step == step]
        if len(places) < 2:
            return

        def key(row: Row) -> list:
            return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", row.label)]

        ordered = sorted((block.rows[i] for i in places), key=key)
        for i, row in zip(places, ordered, strict=True):
            block.rows[i] = row

    # ------------------------------------------------------------------ queries
    def failed(self) -> list[Row]:
        """The failed tasks, in the order they appear."""
        with self.lock:
            return [r for b in self.blocks for r in b.rows if r.state == FAILED]

    def counts(self) -> dict[str, int]:
        with self.lock:
            counted: dict[str, int] = {}
            for row in (r for b in self.blocks for r in b.rows):
                counted[row.state] = counted.get(row.state, 0) + 1
            return counted

    # ------------------------------------------------------------------ rendering
    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def _header(self, block: Block) -> str:
        now = block.ended if block.ended is not None else self.clock()
        done = sum(r.state == DONE for r in block.rows)
        runs = sum(r.state != SKIPPED for r in block.rows)
        if block.ok is None:
            state = f"running {_seconds(now - block.started)}"
        else:
            state = f"{'done' if block.ok else 'FAILED'} in {_seconds(now - block.started)}"
        return f"{block.name}: {state} ({done}/{runs} tasks done)"

    def _row_text(self, row: Row, plain: bool = False) -> str:
        now = self.clock()
        label = row.label if len(row.label) <= LABEL_WIDTH else row.label[: LABEL_WIDTH - 1] + "~"
        if row.state == RUNNING:
            state = f"running {_seconds(now - (row.started or now))}"
        elif row.state in (DONE, FAILED):
            took = _seconds((row.ended or now) - (row.started or now))
            state = f"done    {took}" if row.state == DONE else f"FAILED  {took}"
            if row.state == FAILED and row.log is not None:
                state += f"  log: {row.log}"
        else:
            state = row.state
        text = f"{label:<{LABEL_WIDTH}} {state}"
        return text if plain else f"  {text}"

    @staticmethod
    def _skipped_text(rows: list[Row], ok: bool) -> str:
        names = ", ".join(r.label for r in rows[:4]) + (", ..." if len(rows) > 4 else "")
        why = "their condition was false" if ok else "an earlier task failed"
        return f"  {len(rows)} tasks not run ({why}): {names}"

    def _frame(self, block: Block, height: int) -> list[str]:
        """The block's lines, at most `height`: finished rows beyond the room are counted."""
        rows = [r for r in block.rows if r.state != SKIPPED]
        skipped = [r for r in block.rows if r.state == SKIPPED]
        lines = [self._row_text(r) for r in rows]
        if skipped:
            lines.append(self._skipped_text(skipped, bool(block.ok)))
        room = max(3, height - 1)
        if len(lines) > room:
            finished = [i for i, r in enumerate(rows) if r.state == DONE]
            hide = set(finished[: len(lines) - room + 1])
            lines = [f"  ... {len(hide)} tasks done"] + [
                line for i, line in enumerate(lines) if i not in hide
            ]
            lines = lines[:room]
        return [self._header(block), *lines]

    def _draw(self) -> None:
        if not self.tty or not self.blocks:
            return
        width, height = self.size()
        lines = [line[: max(20, width - 1)] for line in self._frame(self.blocks[-1], height - 2)]
        up = f"\x1b[{self.drawn}F" if self.drawn else ""
        self.stream.write(up + "".join(f"\x1b[2K{line}\n" for line in lines) + "\x1b[J")
        self.stream.flush()
        self.drawn = len(lines)


class Ticker:
    """Calls view.tick() every `every` seconds in a daemon thread until stopped."""

    def __init__(self, view: TaskView, every: float = 0.5) -> None:
        self.view, self.every = view, every
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="taskview-ticker", daemon=True)

    def _loop(self) -> None:
        while not self.stopped.wait(self.every):
            self.view.tick()

    def __enter__(self) -> Ticker:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()
