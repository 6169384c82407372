"""One model's score-run folder (`autocomp score`: <out>/<model>/), owned by `ScoreRun`:

    run.json                   model entry, benchmark (source, digest), mode, limit, versions (a
                               resumed run must match it)
    scores/part-NNNNN.parquet  model, sample_id, candidate_index, score, tokens (SCORES_SCHEMA)
    predictions/part-*.parquet one row per sample x set x protocol x score type
                               (PREDICTIONS_SCHEMA)
    summary.parquet            accuracy per family x N x condition x set x protocol x score type,
                               with chance

Choice rows (`--blind choice`): scores rows are the option labels' scores, with the set,
protocol and shown position (`option`); predictions list the options shown (`options`:
candidate indices in the order shown, comma separated; a string, so the table stays joinable
and writable as CSV). Tables written before `score_type` existed read as all "score".

Resume: items whose predictions already exist in the folder are not scored again; parts are
written atomically, so a killed run resumes at the first unfinished part; items that failed are
dropped and scored again. A folder written before score types (run.json without "format") is
upgraded in place when it is contrastive (its scores are complete) and refused when it is
generative (no token counts for the per-token score). A resumed run may raise or drop its limit
(the first items are scored already; only the rest is scored), never lower it (the summary would
then count items outside the limit).

Plain pyarrow: no model library, nothing of autocomp.scoring (the layer above).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from autocomp.errors import UsageError
from autocomp.store.atomic import sweep_stale, write_json
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA, SCORES_SCHEMA
from autocomp.store.outputs import check_output
from autocomp.store.tables import provenance, read_metadata, read_parquet, write_table

SCORE_FORMAT = 2  # 2: scores have tokens, predictions score_type (run.json "format")
SUMMARY_KEYS = ("model", "family", "n", "condition", "set", "protocol", "score_type")
RUN_FILE = "run.json"
SUMMARY_FILE = "summary.parquet"


class ScoreRun:
    """The run folder of one model on one benchmark: check, resume, write, read."""

    def __init__(self, folder: str | Path, option: str = "run") -> None:
        self.folder = Path(folder)
        self.option = option  # the input that named the folder, for errors (score: `out`)
        self.upgrade = False  # check() found a run written before score types

    @property
    def scores(self) -> Path:
        return self.folder / "scores"

    @property
    def predictions(self) -> Path:
        return self.folder / "predictions"

    def _parts(self) -> list[Path]:
        return sorted(self.predictions.glob("part-*.parquet"))

    # ------------------------------------------------------------------ before any work

    def check(self, record: dict[str, Any], rows: int) -> None:
        """A resumed run must be of the same model, weights, benchmark and mode, and may only
        extend its --limit (`rows`: the benchmark's); checked before any work. Sets `upgrade`
        when the folder holds a run written before score types."""
        out = self.folder
        if out.exists() and not out.is_dir():
            raise UsageError("out", str(out), "is a file; give a folder for the run")
        check_output(out)
        run_file = out / RUN_FILE
        if not run_file.exists():
            return
        try:
            previous = json.loads(run_file.read_text())
        except (OSError, ValueError):
            raise UsageError(
                "out", str(run_file), "is unreadable; delete the folder to start over"
            ) from None
        if not isinstance(previous, dict) or not isinstance(previous.get("entry") or {}, dict):
            fix = "is not a run record (a JSON mapping); delete the folder to start over"
            raise UsageError("out", str(run_file), fix)
        limit = previous.get("limit")
        if limit is not None and (type(limit) is not int or limit < 1):
            fix = f"holds limit {limit!r}, not a whole number; delete the folder to start over"
            raise UsageError("out", str(run_file), fix)
        self.upgrade = previous.get("format") is None
        previous = self._in_todays_terms(previous)
        keys = ("model", "benchmark_sha", "blind", "choice")
        weights = ("weights", "architecture", "model_class", "revision")  # same name, other
        entry, now = previous.get("entry") or {}, record["entry"]  # weights: another model
        same_weights = all(entry.get(k) == now.get(k) for k in weights) or not entry
        if any(previous.get(k) != record.get(k) for k in keys) or not same_weights:
            raise UsageError(
                "out",
                str(out),
                "holds a run of another model, benchmark or mode (--blind and its choice "
                "settings); use a new folder to keep both",
            )
        before = min(previous.get("limit") or rows, rows)
        if min(record.get("limit") or rows, rows) < before:
            raise UsageError(
                "limit",
                record.get("limit"),
                f"{out} already holds the first {before} items; a resumed run may only extend "
                f"it: give --limit {before} or more (or none), or a new --out",
            )

    def _in_todays_terms(self, previous: dict[str, Any]) -> dict[str, Any]:
        """The previous run's record in today's terms. A run written before score types (no
        "format") is upgraded when its scores are complete (contrastive: only the native
        score); a generative one is refused, since its items have no token counts for the
        per-token score."""
        if previous.get("format") == SCORE_FORMAT:
            return previous
        if previous.get("format") is not None:
            raise UsageError(
                "out", str(self.folder), f"holds a run in format {previous['format']} of "
                "another autocomp version; score into a new folder",
            )  # fmt: skip
        if (previous.get("entry") or {}).get("score") == "loglik" or previous.get("blind"):
            raise UsageError(
                "out", str(self.folder), "holds a generative run made before per-token scores "
                "(it has no token counts); score into a new folder, or delete this one to score "
                "it again",
            )  # fmt: skip
        return {**previous, "blind": "", "choice": None}

    # ------------------------------------------------------------------ resume

    def resume(self) -> set[str]:
        """Make the folder ready to go on (stale temporary files removed, an old run upgraded,
        failed items dropped); return the sample ids already scored."""
        for folder in (self.folder, self.scores, self.predictions):
            sweep_stale(folder)
        if self.upgrade:
            self._upgrade_parts()
        if not self.predictions.is_dir():
            return set()
        self._drop_failures()
        done: set[str] = set()
        for part in self._parts():
            done.update(_read(part, ["sample_id"], option=self.option).column(0).to_pylist())
        return done

    def next_part(self) -> int:
        """The number of the next part to write."""
        return max((int(p.stem.split("-")[1]) + 1 for p in self._parts()), default=0)

    def _drop_failures(self) -> None:
        """Failed items are retried by the next run: rewrite (atomically) every part that holds
        failures without them, scores and predictions alike; a part left empty goes."""
        for part in self._parts():
            predictions = _read(part, option=self.option)
            failed = set(predictions.filter(predictions["failed"])["sample_id"].to_pylist())
            if not failed:
                continue
            for folder in (self.predictions, self.scores):
                path = folder / part.name
                table = _read(path, option=self.option)
                keep = pc.invert(pc.is_in(table["sample_id"], pa.array(sorted(failed))))
                kept = table.filter(keep)
                if kept.num_rows:
                    write_table(kept.replace_schema_metadata(None), path, read_metadata(path))
                else:
                    path.unlink(missing_ok=True)

    def _upgrade_parts(self) -> None:
        """Rewrite (atomically) the parts of a run made before score types in today's schemas:
        score_type "score", no token counts, no choice columns."""
        for folder, schema in (
            (self.scores, SCORES_SCHEMA),
            (self.predictions, PREDICTIONS_SCHEMA),
        ):
            for path in sorted(folder.glob("part-*.parquet")):
                table = _read(path, option=self.option)
                if "score_type" not in table.column_names:
                    table = _conform(table.replace_schema_metadata(None), schema)
                    write_table(table, path, read_metadata(path))

    # ------------------------------------------------------------------ writing

    def start(self, record: dict[str, Any]) -> None:
        """Create the folder and its run.json: only once a scored part is about to be written
        (or the run is done), so a run that fails before (weights, device) leaves nothing."""
        self.scores.mkdir(parents=True, exist_ok=True)
        self.predictions.mkdir(exist_ok=True)
        write_json(self.folder / RUN_FILE, record, indent=2)

    def write_part(
        self,
        index: int,
        scores: Sequence[dict[str, Any]],
        predictions: Sequence[dict[str, Any]],
        document: dict[str, Any],
    ) -> None:
        """Part `index` of the scores and of the predictions (`document`: the scores' metadata;
        the predictions' says "predictions")."""
        name = f"part-{index:05d}.parquet"
        write_table(pa.Table.from_pylist(list(scores), SCORES_SCHEMA), self.scores / name, document)
        write_table(
            pa.Table.from_pylist(list(predictions), PREDICTIONS_SCHEMA),
            self.predictions / name,
            {**document, "table": "predictions"},
        )

    def write_summary(self, document: dict[str, Any], summary: pa.Table | None = None) -> pa.Table:
        """summary.parquet from the predictions, or `summary` (`document`: the scores'
        metadata)."""
        summary = self.summarize() if summary is None else summary
        write_table(summary, self.folder / SUMMARY_FILE, {**document, "table": "summary"})
        return summary

    # ------------------------------------------------------------------ reading

    def read_predictions(self) -> pa.Table:
        """Every prediction row, parts older than `truncated` and `score_type` included; a part
        holding exactly the items of an earlier one (a copy under a new number) is left out and
        reported, parts sharing only some items are refused (_distinct)."""
        tables = _distinct(
            [(p, _read(p, option=self.option).replace_schema_metadata(None)) for p in self._parts()]
        )
        if not tables:
            return PREDICTIONS_SCHEMA.empty_table()
        return with_score_type(pa.concat_tables(tables, promote_options="default"))

    def summarize(self) -> pa.Table:
        """Accuracy per model x family x N x condition x set x protocol x score type, with the
        chance baseline."""
        table = self.read_predictions()
        table = table.append_column(
            "chance", pc.divide(1.0, pc.cast(table["candidates"], pa.float64()))
        )
        keys = list(SUMMARY_KEYS)
        grouped = table.group_by(keys).aggregate(
            [
                ("sample_id", "count"),
                ("correct", "sum"),
                ("failed", "sum"),
                ("tie", "sum"),
                ("chance", "mean"),
                ("truncated", "sum"),
            ]
        )
        names = ["items", "correct", "failed", "ties", "chance", "truncated"]
        grouped = grouped.rename_columns(keys + names)
        accuracy = pc.divide(
            pc.cast(grouped["correct"], pa.float64()), pc.cast(grouped["items"], pa.float64())
        )
        return grouped.append_column("accuracy", accuracy).sort_by([(k, "ascending") for k in keys])

    def read_summary(self) -> pa.Table | None:
        """summary.parquet with its score types (None: the folder has none)."""
        path = self.folder / SUMMARY_FILE
        return (
            with_score_type(_read(path, fix=SUMMARY_FIX, option=self.option))
            if path.is_file()
            else None
        )


SUMMED = ("correct", "failed", "tie", "truncated")


def _distinct(parts: list[tuple[Path, pa.Table]]) -> list[pa.Table]:
    """The prediction parts to count, in order: a part whose items (sample ids) are exactly an
    earlier part's is a copy, left out with a note on stderr, never counted twice; parts that
    share only some items are refused, naming both (one was changed or put there by hand)."""
    kept: list[tuple[Path, pa.Table, frozenset[str]]] = []
    for path, table in parts:
        ids = frozenset(table.column("sample_id").to_pylist())
        for first, _, earlier in kept:
            shared = ids & earlier
            if not shared:
                continue
            if ids == earlier:
                print(f"{path}: holds the same {len(ids)} items as {first.name} (a copy); "
                      "it is not counted", file=sys.stderr)  # fmt: skip
                break
            raise UsageError(
                "run", f"{first}, {path.name}", f"share {len(shared)} items: one was changed or "
                f"put there by hand; delete {path.name} (its items are scored again on resume)",
            )  # fmt: skip
        else:
            kept.append((path, table, ids))
    return [table for _, table, _ in kept]


def summarize_parts(parts: Iterable[pa.Table]) -> pa.Table:
    """The summary (ScoreRun.summarize's columns and order) from predictions read part by
    part (a run whose parts are in a store: one part in memory at a time). Counts are exact;
    chance is each group's sum of 1/candidates over its items, summed in part order."""
    keys = list(SUMMARY_KEYS)
    totals: dict[tuple, list[float]] = {}
    for part in parts:
        table = with_score_type(part.replace_schema_metadata(None))
        table = table.append_column(
            "chance", pc.divide(1.0, pc.cast(table["candidates"], pa.float64()))
        )
        grouped = table.group_by(keys).aggregate(
            [("sample_id", "count"), *((c, "sum") for c in SUMMED), ("chance", "sum")]
        )
        for row in grouped.to_pylist():
            key = tuple(row[k] for k in keys)
            values = [row["sample_id_count"], *(row[f"{c}_sum"] for c in SUMMED),
                      row["chance_sum"]]  # fmt: skip
            known = totals.setdefault(key, [0] * len(values))
            totals[key] = [a + (b or 0) for a, b in zip(known, values)]
    rows = []
    for key in sorted(totals, key=lambda k: tuple((v is None, v) for v in k)):
        items, correct, failed, ties, truncated, chance = totals[key]
        rows.append({**dict(zip(keys, key)), "items": items, "correct": correct,
                     "failed": failed, "ties": ties, "chance": chance / items,
                     "truncated": truncated, "accuracy": correct / items})  # fmt: skip
    return _summary_table(rows)


def _summary_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Rows in the summary's schema (the one ScoreRun.summarize's aggregation gives)."""
    counts = pa.uint64()
    types = {"model": pa.string(), "family": pa.string(), "n": pa.int8(),
             "condition": pa.string(), "set": pa.string(), "protocol": pa.string(),
             "score_type": pa.string(), "items": pa.int64(), "correct": counts,
             "failed": counts, "ties": counts, "chance": pa.float64(),
             "truncated": counts, "accuracy": pa.float64()}  # fmt: skip
    return pa.Table.from_pylist(rows, pa.schema(list(types.items())))


def with_score_type(table: pa.Table) -> pa.Table:
    """`table` (predictions or summary) with a score_type column: tables written before it
    existed, or rows without it, are the native "score"."""
    if "score_type" not in table.column_names:
        return table.append_column("score_type", pa.array(["score"] * table.num_rows, pa.string()))
    index = table.column_names.index("score_type")
    return table.set_column(index, "score_type", pc.fill_null(table["score_type"], "score"))


PART_FIX = (
    "parts are written whole or not at all, so this one was damaged or put there by hand: delete "
    "it and its namesake in the other folder (scores/, predictions/), then run `autocomp score` "
    "again (it scores those items anew)"
)
SUMMARY_FIX = "delete it; `autocomp score` on the same folder writes it again from the parts"


def _read(
    path: Path, columns: list[str] | None = None, fix: str = PART_FIX, option: str = "run"
) -> pa.Table:
    """A part or summary of a run folder; a damaged one is one line naming it and the fix."""
    return read_parquet(path, option, columns, fix)


def read_predictions(folder: str | Path) -> pa.Table:
    """The predictions of the run in `folder` (ScoreRun.read_predictions)."""
    return ScoreRun(folder).read_predictions()


def collect_runs(folders: Sequence[str | Path | ScoreRun], out: str | Path) -> pa.Table:
    """One summary table over several score runs (each: one model's run, a folder or the
    ScoreRun a stage already holds), written to <out>/summary.parquet; runs without a summary
    (or with an empty one) are left out."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    found = (f.read_summary() if isinstance(f, ScoreRun) else ScoreRun(f).read_summary()
             for f in folders)  # fmt: skip
    tables = [t for t in found if t is not None and t.num_rows]
    table = pa.concat_tables(tables, promote_options="default") if tables else pa.table({})
    write_table(table, out / SUMMARY_FILE, provenance("summary", runs=len(folders)))
    return table


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` in `schema`: missing columns null, a missing score_type "score"."""
    columns = []
    for field in schema:
        if field.name in table.column_names:
            columns.append(table[field.name].cast(field.type))
        elif field.name == "score_type":
            columns.append(pa.array(["score"] * table.num_rows, pa.string()))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


FAILED_FILE = "failed.json"  # <out>/failed.json: model -> why it did not load


def earlier_runs(out: Path, folders: list[Path], digest: str) -> list[Path]:
    """The model folders an earlier call scored into `out` on the benchmark whose digest is
    `digest` (so a second call's <out>/summary.parquet keeps them), in name order; `folders`
    (this call's) are left out."""
    found = []
    for folder in sorted(p for p in out.iterdir() if p.is_dir() and p not in folders):
        try:
            record = json.loads((folder / RUN_FILE).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("benchmark_sha") == digest:
            found.append(folder)
    return found


def report_failed(out: Path, failed: dict[str, str], scored: int = 1) -> None:
    """<out>/failed.json names the models that failed to load (removed when none did), then
    one error line names them: the models scored stay, in <out>/summary.parquet (`scored`: its
    rows; with none, the line says that nothing was scored)."""
    path = out / FAILED_FILE
    if not failed:
        path.unlink(missing_ok=True)
        return
    write_json(path, failed)
    first, reason = next(iter(failed.items()))
    more = f" (and {len(failed) - 1} more, see {path})" if len(failed) > 1 else ""
    if scored:
        return_note = f"the other models are scored in {out / 'summary.parquet'}"
    else:
        return_note = "no model was scored"
    raise UsageError("models", first, f"{reason}{more}; {return_note}")
