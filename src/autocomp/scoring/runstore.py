"""A score run committed to a store as it goes (`score(..., store=, results=)`: the pipelines'
score steps): preemption-safe, and with a run folder that holds at most one part.

Each part (its scores and predictions, with run.json) is committed as it is written
(store.work.PartLog under `work/score/<key>`; the key is what a resumed run must match:
ScoreRun.check's model, weights, benchmark digest, mode and format), then removed from the
local run folder. A run that starts where a killed or preempted one stopped reads which items
are done from the committed parts (their sample ids, read by range) and scores only the rest,
in the same parts. When the run is done it is published as <results>/<model>: the committed
parts copied inside the store, run.json, and summary.parquet computed from the committed
predictions part by part. A resumed run publishes what an uninterrupted run publishes; a part
made under another key (another model, benchmark or mode) is never reused. Items that failed
stay failed in a stored run (the local folder's resume retries them; a published benchmark's
failures are not transient).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.errors import UsageError
from autocomp.store.catalog.runs import RUN_FILE, SUMMARY_FILE, ScoreRun, summarize_parts
from autocomp.store.storage import Store, manifest_entry, open_verified
from autocomp.store.work import PartLog, work_prefix

WEIGHTS = ("weights", "architecture", "model_class", "revision")


def part_log(
    target: Store, record: dict[str, Any], ranged: dict[str, Any] | None = None
) -> PartLog:
    """Where a run's parts are committed: keyed on what a resumed run must match. The limit is
    not in the key: a resumed run may extend it (run.json, committed with every part, says what
    the parts cover, and ScoreRun.check refuses a lower one). `ranged`: the part plan of a run
    scored in ranges (scoring.ranges.ranged_key), which lives under a key of its own."""
    key = {
        "model": record["model"], "weights": {k: record["entry"].get(k) for k in WEIGHTS},
        "benchmark_sha": record["benchmark_sha"], "blind": record["blind"],
        "choice": record["choice"], "format": record["format"],
        **({"ranged": ranged} if ranged else {}),
    }  # fmt: skip
    return PartLog(target, work_prefix("score", key), key)


def _part(index: int) -> str:
    return f"part-{index:05d}.parquet"


class StoredRun:
    """One model's run whose parts live in a store (see the module doc)."""

    def __init__(
        self,
        target: Store,
        run: ScoreRun,
        record: dict[str, Any],
        key: str = "",
        ranged: dict | None = None,
    ) -> None:
        self.target, self.run, self.record, self.key = target, run, record, key
        self.log = part_log(target, record, ranged)
        self.parts = self.log.committed()
        self.items: dict[int, frozenset[str]] = {}  # part -> its sample ids (its identity)
        self.adopted = False  # another step published this run while this one scored

    def restore_record(self) -> None:
        """The latest committed part's run.json into the run folder (what ScoreRun.check
        then holds this run to)."""
        if not self.parts:
            return
        self.run.folder.mkdir(exist_ok=True)
        name = self.log.name(max(self.parts))
        self.target.get_file(name, RUN_FILE, self.run.folder / RUN_FILE)

    def _read(self, index: int, sub: str, columns: list[str] | None = None) -> pa.Table:
        rel = f"{sub}/{_part(index)}"
        entry = manifest_entry(self.parts[index], rel)
        name = self.log.name(index)
        fix = (f"delete {name} from the store (its items are then scored again) and re-run the "
               "step")  # fmt: skip
        handle = open_verified(self.target, f"{name}/{rel}", entry["size"], entry["sha256"], fix)
        return pq.read_table(handle, columns=columns)

    def resume(self) -> tuple[set[str], int]:
        """The sample ids the committed parts hold and the next part's number."""
        done: set[str] = set()
        for index in self.parts:
            done.update(self._ids(index))
        if self.parts:  # one line: what an earlier, killed or preempted, attempt left
            model, parts = self.record["model"], len(self.parts)
            note = f"resuming after {parts} committed part(s) ({len(done)} items)"
            print(f"score {model}: {note}; scoring only the rest", file=sys.stderr)
        return done, max(self.parts, default=-1) + 1

    def _ids(self, index: int) -> frozenset[str]:
        if index not in self.items:
            ids = self._read(index, "predictions", ["sample_id"]).column(0).to_pylist()
            self.items[index] = frozenset(ids)
        return self.items[index]

    def _published(self) -> bool:
        """Whether another step published this run meanwhile (two steps on one store): this
        one then takes the published run and commits nothing more (none is left behind)."""
        if not self.adopted and self.key and self.target.manifest(self.key) is not None:
            self.adopted = True
        return self.adopted

    def commit(self, index: int) -> None:
        """Part `index` (with run.json) into the store, then out of the run folder."""
        files = {f"{sub}/{_part(index)}": self.run.folder / sub / _part(index)
                 for sub in ("scores", "predictions")}  # fmt: skip
        if not self._published():
            ids = pq.read_table(files[f"predictions/{_part(index)}"], columns=["sample_id"])
            self.parts[index] = self.log.commit(
                index, {**files, RUN_FILE: self.run.folder / RUN_FILE}, stage="score"
            )
            self.items[index] = frozenset(ids.column(0).to_pylist())
        for path in files.values():
            path.unlink()

    def distinct(self) -> list[int]:
        """The parts to publish: a part holding exactly the items of an earlier one (a copy
        under a new number) is left out and reported, never counted twice; parts that share
        only some items are one line naming both and the fix."""
        kept: list[int] = []
        for index in self.parts:
            ids = self._ids(index)
            for earlier in kept:
                shared = ids & self.items[earlier]
                if not shared:
                    continue
                first, second = self.log.name(earlier), self.log.name(index)
                if ids == self.items[earlier]:
                    note = f"{second} holds the same {len(ids)} items as {first} (a copy)"
                    print(f"score {self.record['model']}: {note}; it is not published",
                          file=sys.stderr)  # fmt: skip
                    break
                raise UsageError(
                    "committed parts", f"{first}, {second}",
                    f"share {len(shared)} items: one was changed or put there by hand; delete "
                    f"{second} from the store (its items are scored again) and re-run the step",
                )  # fmt: skip
            else:
                kept.append(index)
        return kept

    def summary(self) -> pa.Table:
        if self._published():
            fetch_summary(self.target, self.key, self.run)
            return pq.read_table(self.run.folder / SUMMARY_FILE)
        return summarize_parts(self._read(i, "predictions") for i in self.distinct())

    def publish(self, key: str, made_by: dict[str, Any]) -> None:
        """The run as the output `key`: parts copied inside the store, then run.json and
        summary.parquet from the run folder, manifest last; the parts' log is then cleared.
        A run another step published meanwhile is kept as it is (its log cleared)."""
        if self.target.manifest(key) is not None:
            self.log.clear()
            fetch_summary(self.target, key, self.run)
            return
        with self.target.writer(key, made_by) as writer:
            for index in self.distinct():
                manifest = self.parts[index]
                for f in manifest["files"]:
                    if f["path"] != RUN_FILE:
                        source = f"{self.log.name(index)}/{f['path']}"
                        writer.add_copy(f["path"], source, f["size"], f["sha256"])
            for name in (RUN_FILE, SUMMARY_FILE):
                writer.add_file(name, self.run.folder / name)
        self.log.clear()


def covers(previous: dict[str, Any], limit: int | None, rows: int) -> bool:
    """Whether a published run (its run.json) holds every item a run with `limit` scores."""
    return min(limit or rows, rows) <= min(previous.get("limit") or rows, rows)


def fetch_summary(target: Store, key: str, run: ScoreRun) -> None:
    """A published run's run.json and summary into the run folder (nothing is scored)."""
    run.folder.mkdir(exist_ok=True)
    for name in (RUN_FILE, SUMMARY_FILE):
        target.get_file(key, name, Path(run.folder) / name)


class Results:
    """Where `score(..., store=, results=)` publishes each model's run: `<results>/<model>` in
    the store. A run published already is held to its record (its run.json fetched first) and
    not scored again unless a higher limit extends it; any other run resumes from the parts a
    killed or preempted run committed (StoredRun)."""

    def __init__(self, target: Store, results: str, runs: list[tuple[Any, ScoreRun, dict]],
                 ranged: Callable[[dict], dict | None] | None = None):  # fmt: skip
        self.target, self.results = target, results
        self.ranged = ranged or (lambda record: None)  # a ranged run's key (scoring.ranges)
        self.published = {e.name for e, _, _ in runs if target.manifest(self.key(e.name))}
        self.stored: dict[str, StoredRun] = {}
        for entry, run, record in runs:
            if entry.name in self.published:
                run.folder.mkdir(exist_ok=True)
                target.get_file(self.key(entry.name), RUN_FILE, run.folder / RUN_FILE)
            else:
                self.stored[entry.name] = StoredRun(
                    target, run, record, self.key(entry.name), self.ranged(record)
                )
                self.stored[entry.name].restore_record()

    def key(self, model: str) -> str:
        return f"{self.results}/{model}"

    def reuse(self, name: str, run: ScoreRun, record: dict[str, Any], limit: int | None,
              rows: int) -> bool:  # fmt: skip
        """Whether the published run of `name` covers `limit` (its summary fetched: nothing to
        score); a run with a lower limit there is fetched into the folder to be extended."""
        if name not in self.published:
            return False
        previous = json.loads((run.folder / RUN_FILE).read_text())
        if covers(previous, limit, rows):
            fetch_summary(self.target, self.key(name), run)
            part_log(self.target, record, self.ranged(record)).clear()  # what a killed publish left
            return True
        self.target.get(self.key(name), run.folder)
        return False

    def publish(self, name: str, run: ScoreRun, made_by: dict[str, Any]) -> None:
        if name in self.stored:
            self.stored[name].publish(self.key(name), made_by)
        else:  # an extended published run: replaces the one with the lower limit
            self.target.delete(self.key(name))
            self.target.put(self.key(name), run.folder, made_by)


def open_results(store: str | None, results: str | None) -> Store | None:
    """The store runs are published to (None: no `results`)."""
    if not results:
        return None
    if not store:
        raise UsageError("results", results, "publishes runs into a store: give the store too")
    from autocomp.store.stores import open_store

    return open_store(store)
