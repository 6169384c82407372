"""One text-table formatter for every verb that prints a table, and the line that follows a
table of accuracies whose models have random weights."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain, aligned text table (stable output for terminals, logs and tests)."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in rows]
    return "\n".join(s.rstrip() for s in out)


def random_weights_note(runs: Iterable[Path]) -> list[str]:
    """The note under an accuracy table: which of the score runs' models have random weights,
    as each run.json records it (`weights`, from autocomp.tiny); none when all are trained."""
    from autocomp.analysis.scope import weights_lines

    found = {}
    for run in runs:
        try:
            weights = json.loads((run / "run.json").read_text(encoding="utf-8")).get("weights")
        except (OSError, ValueError, AttributeError):
            continue  # no record to read: nothing to say
        if isinstance(weights, dict) and weights.get("random"):
            found[run.name] = str(weights.get("how", "random"))
    return [f"note: {line}" for line in weights_lines(found)]
