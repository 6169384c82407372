"""A run's working data in the store: where large data lives between steps, and the committed
parts that let a killed, retried or resubmitted step resume.

- `work_prefix(stage, record)`: `work/<stage>/<16 hex of the record's SHA-256>`. The record is
  what the work's output depends on (its inputs' content digests and its configuration), so a
  resubmitted run with the same inputs finds its parts again, and work made under another
  configuration lives under another prefix: it is never reused.
- `Location`: a store and a key prefix, the small manifest (`location.json`) that a KFP artifact
  carries between steps instead of images or the benchmark itself.
- `PartLog`: the committed parts of one piece of work, `<prefix>/part-NNNNN/`, each an output of
  the store (files first, manifest last, so a part is complete or invisible) whose manifest
  names the work's record; a part made under another record is ignored and replaced.

No model library here: the components import this module inside the images.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocomp.store.atomic import write_json
from autocomp.store.storage import Store
from autocomp.store.stores import open_store

WORK = "work"
LOCATION_FILE = "location.json"


def digest(record: Any) -> str:
    """SHA-256 of a JSON-able record (keys sorted: the same record, the same digest)."""
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def work_prefix(stage: str, record: Any) -> str:
    """The store prefix of one stage's work made from `record` (inputs and configuration)."""
    return f"{WORK}/{stage}/{digest(record)[:16]}"


@dataclass(frozen=True)
class Location:
    """Where a step left its large data: a store URI and a key prefix in it (`extra`: what
    else the next step needs to know, e.g. the shard count)."""

    store: str
    prefix: str
    extra: dict[str, Any] = field(default_factory=dict)

    def key(self, rel: str = "") -> str:
        return "/".join(p for p in (self.prefix, rel) if p)

    def open(self) -> Store:
        return open_store(self.store)

    def write(self, folder: str | Path) -> Path:
        """`folder`/location.json (the artifact's whole content)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        document = {"store": self.store, "prefix": self.prefix, **self.extra}
        write_json(folder / LOCATION_FILE, document)
        return folder / LOCATION_FILE

    @classmethod
    def read(cls, folder: str | Path) -> Location:
        document = json.loads((Path(folder) / LOCATION_FILE).read_text())
        store, prefix = document.pop("store"), document.pop("prefix")
        return cls(store, prefix, document)


class PartLog:
    """The committed parts of one resumable piece of work under `prefix` (which should carry
    the record's digest: `work_prefix`). `record` is what a part must have been made with to be
    reused; it is written into every part's manifest."""

    def __init__(self, store: Store, prefix: str, record: Any) -> None:
        self.store, self.prefix, self.record = store, prefix.strip("/"), record
        self.key = digest(record)

    def name(self, index: int) -> str:
        return f"{self.prefix}/part-{index:05d}"

    def committed(self) -> dict[int, dict[str, Any]]:
        """Part number -> manifest, for every complete part made with this record."""
        found = {}
        for name in self.store.outputs(f"{self.prefix}/part-"):
            tail = name.rsplit("/", 1)[-1]
            if "/" in name[len(self.prefix) + 1 :] or not tail[5:].isdigit():
                continue
            manifest = self.store.manifest(name)
            if manifest is not None and manifest.get("made_by", {}).get("key") == self.key:
                found[int(tail[5:])] = manifest
        return dict(sorted(found.items()))

    def fetch(self, index: int, folder: str | Path) -> dict[str, Any]:
        """Part `index`'s files into `folder` (verified against its manifest)."""
        return self.store.get(self.name(index), folder)

    def commit(self, index: int, files: dict[str, Path], **made_by: Any) -> dict[str, Any]:
        """Part `index`: `files` (name in the part -> local file), manifest last. A part there
        made with another record is removed first (never taken for this one)."""
        name = self.name(index)
        existing = self.store.manifest(name)
        if existing is not None and existing.get("made_by", {}).get("key") != self.key:
            self.store.delete(name)
        with self.store.writer(name, {**made_by, "key": self.key, "part": index}) as writer:
            for rel, path in sorted(files.items()):
                writer.add_file(rel, path)
        assert writer.done is not None
        return writer.done

    def clear(self) -> int:
        """Remove every part (once what they built is published)."""
        return self.store.delete(self.prefix)


class TableJournal:
    """Rows of one kind of table committed part by part per shard under `prefix` (a validate
    shard's verdicts: generation.validate.Journal). `resume` returns the rows of the contiguous
    committed parts, in order; `commit` appends the next part."""

    def __init__(self, store: Store, prefix: str, kind: str, num_shards: int, schema: Any) -> None:
        self.store, self.prefix, self.kind = store, prefix.strip("/"), kind
        self.num_shards, self.schema = num_shards, schema
        self.next: dict[int, int] = {}

    def log(self, shard: int, record: dict[str, Any]) -> PartLog:
        name = f"{self.kind}-{shard:05d}-of-{self.num_shards:05d}"
        key = {"record": record, "shard": shard}
        return PartLog(self.store, f"{self.prefix}/parts/{name}", key)

    def resume(self, shard: int, record: dict[str, Any]) -> list[dict[str, Any]]:
        import tempfile

        import pyarrow.parquet as pq

        log, rows, index = self.log(shard, record), [], 0
        committed = log.committed()
        with tempfile.TemporaryDirectory(prefix="journal-") as tmp:
            while index in committed:
                folder = Path(tmp) / str(index)
                log.fetch(index, folder)
                rows += pq.read_table(folder / f"{self.kind}.parquet").to_pylist()
                index += 1
        self.next[shard] = index
        return rows

    def commit(self, shard: int, record: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        import tempfile

        import pyarrow as pa

        from autocomp.store.tables import provenance, write_table

        log = self.log(shard, record)
        index = self.next.get(shard)
        if index is None:
            index = len(log.committed())
        with tempfile.TemporaryDirectory(prefix="journal-") as tmp:
            path = Path(tmp) / f"{self.kind}.parquet"
            table = pa.Table.from_pylist(rows, self.schema)
            write_table(table, path, provenance(self.kind, part=index, shard=shard))
            log.commit(index, {path.name: path}, stage=self.kind)
        self.next[shard] = index + 1
