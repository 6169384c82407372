"""Adaptive scoring (`score --target-width W`): each cell stops when its accuracy is known to
within W percentage points.

A cell is (family, N, condition): its items are scored in one seeded random order (each item's
rank is the SHA-256 of the seed and its sample id, so the order is a uniform permutation that
does not depend on outcomes, and the same for every model). Scoring goes in rounds: in round r
every cell still open scores its items r*k+1 .. (r+1)*k (k = `adaptive_round`); after the round,
for every accuracy the cell feeds (each set x protocol x score type), the anytime-valid
confidence sequence of scoring/sequential.py is updated, and the cell closes when all of them
are narrower than W. A cell's decision after round r rests on its own first (r+1)*k items only,
so the items a cell scores for a width W are a prefix of its order fixed by (seed, k, W): a run
resumed after a kill, or extended later with a smaller W, scores exactly the items a longer run
would have scored next (the run folder's resume skips what is done).

The run folder gets `adaptive.parquet`: per cell and accuracy, the items scored and available,
the sequence's interval, whether the cell closed early, and the GPU-hours the unscored items
would have cost at the rate measured in this call (seconds per item x the entry's GPUs).
Paired comparisons in the report join on the items both runs hold, so they use only items both
models scored. Items are read by row group (a round's items are scattered over the benchmark:
about one row group per item until most of the benchmark is read).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.config import ScoreConfig
from autocomp.errors import UsageError
from autocomp.scoring import Scorer
from autocomp.scoring.items import Item, chunks, item_from_row
from autocomp.scoring.modes import mode_for
from autocomp.scoring.registry import ModelEntry
from autocomp.scoring.sequential import confidence_sequence
from autocomp.store.catalog.benchmarks import Benchmark
from autocomp.store.catalog.ids import row_sample_id
from autocomp.store.catalog.runs import RUN_FILE, ScoreRun
from autocomp.store.tables import provenance, write_table

CELL = ("family", "n", "condition")
ACCURACY = ("set", "protocol", "score_type")
ADAPTIVE_FILE = "adaptive.parquet"


@dataclass(frozen=True)
class Order:
    """The benchmark's rows in adaptive order, per cell."""

    cells: dict[tuple[Any, ...], list[int]]  # cell -> row indices, in scoring order
    ids: dict[int, str]  # row index -> sample id


def check_adaptive(config: ScoreConfig) -> None:
    """The adaptive settings are valid (checked with the rest of the configuration)."""
    width = config.target_width
    if width is None:
        return
    if not 0 < width <= 100:
        raise UsageError("target_width", width, "must lie in (0, 100] percentage points")
    if config.limit is not None:
        raise UsageError("limit", config.limit, "cannot be combined with target_width (each "
                         "cell decides how many of its items to score); drop one")  # fmt: skip
    if config.adaptive_round < 1:
        raise UsageError("adaptive_round", config.adaptive_round, "must be at least 1 (items)")
    if config.blind == "choice":
        raise UsageError("target_width", width, "is not available with the choice test")


def adaptive_record(config: ScoreConfig) -> dict[str, Any]:
    """What run.json records of an adaptive run (the order's seed and round decide which items
    a width scores; a later call may change the width, never these)."""
    return {"seed": config.adaptive_seed, "round": config.adaptive_round}


def _check_resumable(run: ScoreRun, record: dict[str, Any]) -> None:
    path = run.folder / RUN_FILE
    if not path.exists():
        return
    before = json.loads(path.read_text()).get("adaptive")
    if before is not None and before != record["adaptive"]:
        raise UsageError(
            "adaptive_seed", record["adaptive"], f"{run.folder} holds an adaptive run with "
            f"{before}; use the same seed and round to extend it, or a new --out",
        )  # fmt: skip


def order(source: Benchmark, seed: int) -> Order:
    """Every row's cell and rank (reads only the cell columns and the sample ids)."""
    columns = [c for c in ("sample_id", "concept_id", *CELL) if c in source.schema.names]
    ranked: dict[tuple[Any, ...], list[tuple[str, int]]] = {}
    ids: dict[int, str] = {}
    index = 0
    for batch in source.batches(columns=columns):
        for row in batch.to_pylist():
            sample_id = str(row_sample_id(row, index))
            cell = (row["family"], int(row["n"]), str(row.get("condition") or "minimal"))
            rank = hashlib.sha256(f"{seed}:{sample_id}".encode()).hexdigest()
            ranked.setdefault(cell, []).append((rank, index))
            ids[index] = sample_id
            index += 1
    cells = {c: [i for _, i in sorted(rows)] for c, rows in sorted(ranked.items())}
    return Order(cells, ids)


def _read_rows(source: Benchmark, wanted: list[int]) -> dict[int, dict[str, Any]]:
    """The rows numbered `wanted`, reading only the row groups that hold them."""
    found: dict[int, dict[str, Any]] = {}
    pending = sorted(wanted)
    at, start = 0, 0
    for part in source.files:
        opened: Any = pq.ParquetFile(part) if isinstance(part, Path) else part.open()
        meta = opened.metadata
        for g in range(meta.num_row_groups):
            end = start + meta.row_group(g).num_rows
            inside = []
            while at < len(pending) and pending[at] < end:
                inside.append(pending[at])
                at += 1
            if inside:
                rows = opened.read_row_group(g).to_pylist()
                found.update((i, rows[i - start]) for i in inside)
            start = end
    return found


def _outcomes(run: ScoreRun, rank: dict[str, int]) -> dict[tuple[Any, ...], list[bool]]:
    """Per (cell, set, protocol, score type): the items' correctness in scoring order."""
    table = run.read_predictions()
    rows = table.select(["sample_id", *CELL, *ACCURACY, "correct"]).to_pylist()
    rows.sort(key=lambda r: rank.get(r["sample_id"], -1))
    seen: dict[tuple[Any, ...], list[bool]] = {}
    for r in rows:
        key = (r["family"], int(r["n"]), r["condition"], *(r[k] for k in ACCURACY))
        seen.setdefault(key, []).append(bool(r["correct"]))
    return seen


def _closed(
    outcomes: dict[tuple, list[bool]], sizes: dict[tuple, int], width: float, count: int | None
) -> set:
    """The cells every accuracy of which, on the cell's first `count` items (None: all it
    has), is narrower than `width` (a fraction)."""
    widest: dict[tuple, float] = {}
    for key, scored in outcomes.items():
        cell = key[:3]
        values = scored if count is None else scored[:count]
        seq = confidence_sequence(np.array(values, dtype=float), sizes[cell])
        now = float(seq.width()[-1]) if values else 1.0
        widest[cell] = max(widest.get(cell, 0.0), now)
    return {cell for cell, w in widest.items() if w < width}


def _rounds(
    plan: Order, done: set[str], config: ScoreConfig, closed: Callable[[int], set]
) -> Iterator[list[int]]:
    """Round by round, the rows still to score of every open cell (rows already done are
    skipped). Before the round that starts at item r of each cell, a cell is closed when its
    first r items say so: the decision a fresh run makes there, whatever a resumed or
    extended run already holds beyond it."""
    k = config.adaptive_round
    longest = max((len(rows) for rows in plan.cells.values()), default=0)
    for r in range(0, longest, k):
        shut = closed(r) if r else set()
        todo = [
            i
            for cell, rows in plan.cells.items()
            if cell not in shut
            for i in rows[r : r + k]
            if plan.ids[i] not in done
        ]
        if todo:
            yield todo
        if len(shut) == len(plan.cells):
            return


def score_adaptive(
    entry: ModelEntry,
    source: Benchmark,
    run: ScoreRun,
    record: dict[str, Any],
    config: ScoreConfig,
    loader: Callable[[], Scorer],
    progress: Callable[[int], None] | None,
) -> pa.Table:
    """Score `run` adaptively (see the module doc); write and return the summary."""
    record = {**record, "adaptive": adaptive_record(config)}
    _check_resumable(run, record)
    plan = order(source, config.adaptive_seed)
    sizes = {cell: len(rows) for cell, rows in plan.cells.items()}
    rank = {plan.ids[i]: n for rows in plan.cells.values() for n, i in enumerate(rows)}
    done, part = run.resume(), run.next_part()
    width = float(config.target_width or 100) / 100
    root = Path(config.images) if config.images else None
    document = provenance(
        "scores", model=entry.name, entry=entry.record(), benchmark_sha=source.digest,
        blind=config.blind, choice=record["choice"], adaptive=record["adaptive"],
    )  # fmt: skip
    mode = mode_for(entry, config)
    scorer: Scorer | None = None

    def get_scorer() -> Scorer:
        nonlocal scorer
        scorer = scorer or loader()
        return scorer

    spent, scored = 0.0, 0
    closed = lambda r: _closed(_outcomes(run, rank), sizes, width, r)  # noqa: E731
    for rows in _rounds(plan, done, config, closed):
        found = _read_rows(source, rows)
        items: list[Item] = [item_from_row(found[i], i) for i in rows]
        for chunk in chunks(items, config.max_candidates):
            began = time.perf_counter()
            score_rows, prediction_rows = mode(entry.name, chunk, get_scorer, root)
            spent += time.perf_counter() - began
            scored += len(chunk)
            run.start(record)
            run.write_part(part, score_rows, prediction_rows, document)
            part += 1
            if progress:
                progress(len(chunk))
    run.start(record)
    rate = spent / scored if scored else None
    _write_cells(run, _outcomes(run, rank), sizes, width, rate, max(entry.gpus, 1), document)
    return run.write_summary(document)


def _write_cells(
    run: ScoreRun,
    outcomes: dict[tuple, list[bool]],
    sizes: dict[tuple, int],
    width: float,
    rate: float | None,
    gpus: int,
    document: dict[str, Any],
) -> None:
    shut = _closed(outcomes, sizes, width, None)
    rows = []
    for key, values in sorted(outcomes.items(), key=lambda kv: str(kv[0])):
        cell = key[:3]
        seq = confidence_sequence(np.array(values, dtype=float), sizes[cell])
        left = sizes[cell] - len(values)
        rows.append({
            **dict(zip(CELL, cell)), **dict(zip(ACCURACY, key[3:])),
            "scored": len(values), "available": sizes[cell],
            "correct": int(sum(values)), "lower": float(seq.lower[-1]),
            "upper": float(seq.upper[-1]), "target_width": width,
            "closed_early": cell in shut and left > 0,
            "seconds_per_item": rate,
            "gpu_hours_saved": None if rate is None else left * rate * gpus / 3600,
        })  # fmt: skip
    write_table(pa.Table.from_pylist(rows), run.folder / ADAPTIVE_FILE, document)
