"""Data-parallel scoring of one model: its benchmark cut into K contiguous ranges of the parts an
uninterrupted run writes, each range scored by one pod and committed to the store; `merge`
(the collect step) publishes the run once every part is there, and what it publishes is
byte-identical to what one pod scoring everything publishes.

The parts: an uninterrupted run cuts the items into chunks of at most `max_candidates`
candidates (items.chunks), one part each. `part_starts` finds those boundaries from the
candidate counts alone (the three candidate list columns, never the images), so every pod
agrees on them without talking to the others. Range k of K holds parts
[P(k-1)/K, Pk/K) (integer division); a pod reads only the row groups holding its rows
(`range_batches`), scores each of its parts that is not committed yet (a retried or resumed
range scores only the rest; a part another pod committed meanwhile is not committed again:
the store's writer leaves a complete output as it is), and publishes nothing.

Parts of a ranged run live under a key of their own (`ranged_key`: the run's record, with the
part plan's settings), so a part written by another configuration (another model, benchmark,
mode, version, `max_candidates` or `limit`) is never merged, and an unranged run's parts never
mix with a ranged one's. `merge` refuses a run with a missing part (naming the ranges to score
again).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from autocomp.config import ScoreConfig
from autocomp.errors import UsageError
from autocomp.scoring import Scorer
from autocomp.scoring.items import item_from_row
from autocomp.scoring.registry import ModelEntry
from autocomp.scoring.runstore import StoredRun, covers
from autocomp.store.catalog.benchmarks import STREAM_ROWS, Benchmark, RemotePart
from autocomp.store.catalog.runs import ScoreRun
from autocomp.store.tables import provenance
from autocomp.store.transfer import read_ahead
from autocomp.store.work import digest

COUNTED = ("confusion_negatives", "vary_attribute_negatives", "vary_object_negatives")
ITEM_MARK = "@"  # a loop item of evaluate_models: <model>@<k>-of-<K>


@dataclass(frozen=True)
class PartRange:
    """Range `index` (1-based) of `count` contiguous ranges of a run's parts."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def parts(self, total: int) -> range:
        """The part numbers this range holds, of `total` parts."""
        return range(total * (self.index - 1) // self.count, total * self.index // self.count)


def parse_range(text: str) -> PartRange | None:
    """`ScoreConfig.part_range`: "" (every part) or "k/K" with 1 <= k <= K."""
    if not text:
        return None
    index, _, count = text.partition("/")
    if index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count):
        return PartRange(int(index), int(count))
    raise UsageError(
        "part_range", text, "must be k/K with 1 <= k <= K (range k of K), or empty for every part"
    )


def loop_items(model: str, count: int) -> list[str]:
    """evaluate_models' loop items for one model scored in `count` ranges (1: the model)."""
    if count <= 1:
        return [model]
    return [f"{model}{ITEM_MARK}{k}-of-{count}" for k in range(1, count + 1)]


def split_item(item: str) -> tuple[str, str]:
    """A loop item as (model, part_range): "clip@2-of-4" -> ("clip", "2/4")."""
    model, _, where = item.partition(ITEM_MARK)
    return model, where.replace("-of-", "/")


def ranged_key(record: dict[str, Any], config: ScoreConfig) -> dict[str, Any]:
    """What the parts of a ranged run are keyed on beyond the model, weights, benchmark and
    mode (runstore.part_log): the whole record (version, limit, batch size) and the part
    plan's `max_candidates`."""
    return {"record": digest(record), "max_candidates": config.max_candidates}


def part_starts(source: Benchmark, limit: int | None, max_candidates: int) -> list[int]:
    """The first row of every part an uninterrupted run writes (items.chunks' rule), then the
    number of rows scored; read from the candidate list columns alone."""
    total = min(limit or source.rows, source.rows)
    starts: list[int] = []
    row = size = 0
    for batch in source.batches(columns=list(COUNTED), verify=False):  # a glance: every pod
        counts = pc.add(1, pc.list_value_length(batch.column(COUNTED[0])).fill_null(0))
        for column in COUNTED[1:]:
            counts = pc.add(counts, pc.list_value_length(batch.column(column)).fill_null(0))
        for n in counts.to_pylist():
            if row >= total:
                break
            if not starts or size + n > max_candidates:
                starts.append(row)
                size = 0
            size += n
            row += 1
    return [*starts, total]


def _open(part: Path | RemotePart) -> pq.ParquetFile:
    return part.open() if isinstance(part, RemotePart) else pq.ParquetFile(part)


def range_batches(source: Benchmark, start: int, stop: int) -> Iterator[pa.RecordBatch]:
    """Rows [start, stop) of the benchmark, reading only the parts and row groups that hold
    them (from a store: by range, the next batch read while this one is used; only those
    parts are verified, a part before `start` is skipped by its row count)."""

    def stream() -> Iterator[pa.RecordBatch]:
        offset = 0
        for part, rows in zip(source.files, source.part_rows):
            if offset + rows <= start:
                offset += rows
                continue
            opened = _open(part)
            meta = opened.metadata
            for group in range(meta.num_row_groups):
                low = offset
                offset += meta.row_group(group).num_rows
                if offset <= start or low >= stop:
                    continue
                for batch in opened.iter_batches(batch_size=STREAM_ROWS, row_groups=[group]):
                    first, last = max(start - low, 0), min(stop - low, batch.num_rows)
                    if first < last:
                        yield batch.slice(first, last - first)
                    low += batch.num_rows
            if offset >= stop:
                return

    yield from read_ahead(stream(), depth=2) if source.remote else stream()


def _rows(source: Benchmark, start: int, stop: int) -> Iterator[tuple[int, dict[str, Any]]]:
    index = start
    for batch in range_batches(source, start, stop):
        for row in batch.to_pylist():
            yield index, row
            index += 1


def scores_document(record: dict[str, Any]) -> dict[str, Any]:
    """The scores' metadata document of a run (modes.score_parts' document, from run.json)."""
    return provenance(
        "scores", model=record["model"], entry=record["entry"],
        benchmark_sha=record["benchmark_sha"], blind=record["blind"], choice=record["choice"],
    )  # fmt: skip


def score_range(
    entry: ModelEntry,
    source: Benchmark,
    stored: StoredRun,
    config: ScoreConfig,
    loader: Callable[[], Scorer],
    progress: Callable[[int], None] | None = None,
) -> list[int]:
    """Score the parts of `config.part_range` that the store lacks, each committed as it is
    written; return the part numbers this call committed."""
    from autocomp.scoring.modes import mode_for

    where = parse_range(config.part_range)
    assert where is not None
    starts = part_starts(source, config.limit, config.max_candidates)
    mine = where.parts(len(starts) - 1)
    todo = [p for p in mine if p not in stored.parts]
    if len(todo) < len(mine):  # one line: what an earlier attempt of this range left
        note = f"{len(mine) - len(todo)} of its {len(mine)} part(s) committed already"
        print(f"score {entry.name} range {where}: {note}; scoring only the rest", file=sys.stderr)
    root = Path(config.images) if config.images else None
    document, mode = scores_document(stored.record), mode_for(entry, config)
    scorer: Scorer | None = None

    def get_scorer() -> Scorer:  # loaded on the first item that can be scored, not before
        nonlocal scorer
        scorer = scorer or loader()
        return scorer

    committed = []
    for first, last in _runs(todo):  # consecutive parts: one read of their rows
        rows = _rows(source, starts[first], starts[last + 1])
        for part in range(first, last + 1):
            size = starts[part + 1] - starts[part]
            chunk = [item_from_row(row, i) for i, row in (next(rows) for _ in range(size))]
            if _committed(stored, part):
                continue  # another pod of the same range committed it meanwhile
            score_rows, prediction_rows = mode(entry.name, chunk, get_scorer, root)
            stored.run.start(stored.record)
            stored.run.write_part(part, score_rows, prediction_rows, document)
            stored.commit(part)
            committed.append(part)
            if progress:
                progress(len(chunk))
    return committed


def _runs(parts: list[int]) -> Iterator[tuple[int, int]]:
    """Consecutive part numbers as (first, last) runs."""
    run: list[int] = []
    for part in parts:
        if run and part != run[-1] + 1:
            yield run[0], run[-1]
            run = []
        run.append(part)
    if run:
        yield run[0], run[-1]


def _committed(stored: StoredRun, part: int) -> bool:
    """Whether part `part` is committed under this run's key now (by this pod or another)."""
    manifest = stored.log.store.manifest(stored.log.name(part))
    return manifest is not None and manifest.get("made_by", {}).get("key") == stored.log.key


def merge(
    entry: ModelEntry, source: Benchmark, config: ScoreConfig, store: str, results: str
) -> bool:
    """Publish the ranged run of `entry` as <results>/<model> (what `score` publishes for one
    pod, byte for byte) once every part of the plan is committed; False when a run covering
    the limit is published there already. A missing part is a usage error naming it."""
    from autocomp.scoring.modes import run_record
    from autocomp.scoring.runstore import open_results
    from autocomp.store.catalog.runs import RUN_FILE

    target = open_results(store, results)
    assert target is not None
    record, key = run_record(entry, source, config), f"{results}/{entry.name}"
    with tempfile.TemporaryDirectory(prefix="merge-") as scratch:
        run = ScoreRun(Path(scratch) / entry.name)
        if target.manifest(key) is not None:
            target.get_file(key, RUN_FILE, Path(scratch) / RUN_FILE)
            previous = json.loads((Path(scratch) / RUN_FILE).read_text())
            if covers(previous, config.limit, source.rows):
                return False
        stored = StoredRun(target, run, record, ranged=ranged_key(record, config))
        total = len(part_starts(source, config.limit, config.max_candidates)) - 1
        missing = [p for p in range(total) if p not in stored.parts]
        if missing:
            shown = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise UsageError(
                "models", entry.name, f"{len(missing)} of its {total} parts are not committed "
                f"(part {shown}): run the score steps of their ranges again, then collect",
            )  # fmt: skip
        run.start(record)
        run.write_summary(scores_document(record), stored.summary())
        if target.manifest(key) is not None:  # a published run with a lower limit: replaced
            target.delete(key)
        name = source.name or PurePosixPath(results).name
        stored.publish(key, {"stage": "score", "model": entry.name, "benchmark": name})
    return True
