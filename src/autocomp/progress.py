"""Progress display for long stages (rich, on stderr; silent when stderr is not a terminal)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


@contextlib.contextmanager
def row_progress(label: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """Yield `advance(rows)`; shows a bar with rows done, total and time left."""
    console = Console(stderr=True)
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(
        *columns, console=console, transient=True, disable=not console.is_terminal
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda rows: bar.advance(task, rows)
