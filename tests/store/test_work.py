"""The store's work area: committed parts keyed on what made them (complete or invisible, never
reused under another key), streamed outputs (manifest last), objects read by range, parallel
transfers with bounded memory, and one-line errors for a full or refusing store."""

from __future__ import annotations

import errno
import io
import json
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp.errors import UsageError
from autocomp.store.catalog.runs import ScoreRun, summarize_parts
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA
from autocomp.store.images import ImageFolder, StoreImages
from autocomp.store.local import LocalStore
from autocomp.store.paths import OutsideRoot
from autocomp.store.storage import MANIFEST, StorageError
from autocomp.store.transfer import RangeFile, ordered_map, read_ahead
from autocomp.store.work import Location, PartLog, TableJournal, digest, work_prefix


def _file(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def test_work_prefixes_key_on_the_record_not_its_order():
    a = work_prefix("render", {"seed": 0, "renderer": "x", "input": "abc"})
    b = work_prefix("render", {"input": "abc", "renderer": "x", "seed": 0})
    assert a == b and a.startswith("work/render/") and len(a.rsplit("/", 1)[1]) == 16
    assert work_prefix("render", {"seed": 1, "renderer": "x", "input": "abc"}) != a
    assert digest({"a": 1}) != digest({"a": 2})


def test_parts_are_complete_or_invisible_and_never_reused_under_another_key(tmp_path):
    store = LocalStore(tmp_path / "store")
    log = PartLog(store, "work/score/k1", {"model": "m", "benchmark_sha": "b1"})
    assert log.committed() == {}
    log.commit(0, {"scores/p.parquet": _file(tmp_path / "src", "a", b"part zero")})
    log.commit(1, {"scores/p.parquet": _file(tmp_path / "src", "b", b"part one")})
    assert list(log.committed()) == [0, 1]
    log.fetch(1, tmp_path / "back")
    assert (tmp_path / "back" / "scores" / "p.parquet").read_bytes() == b"part one"
    # an older configuration's part in the same place is not taken, and is replaced
    older = PartLog(store, "work/score/k1", {"model": "m", "benchmark_sha": "OLD"})
    assert older.committed() == {}
    older.commit(0, {"scores/p.parquet": _file(tmp_path / "src", "c", b"old config")})
    assert list(older.committed()) == [0] and list(log.committed()) == [1]
    # a writer that fails half-way leaves no manifest: the part does not exist
    with (
        pytest.raises(RuntimeError),
        store.writer("work/score/k1/part-00002", {"key": log.key}) as w,
    ):
        w.add_bytes("scores/p.parquet", b"half")
        raise RuntimeError("killed")
    assert list(log.committed()) == [1]
    assert not any(p.name == MANIFEST for p in (tmp_path / "store").rglob("part-00002/*"))
    log.clear()
    assert log.committed() == {} and store.list("work/score/k1") == []


def test_a_streamed_output_appears_only_when_its_manifest_is_written(tmp_path):
    store = LocalStore(tmp_path / "store")
    seen = []
    with store.writer("benchmarks/b", {"stage": "publish"}) as writer:
        writer.add_bytes("README.md", b"# card")
        path = _file(tmp_path / "w", "part.parquet", b"PAR1" * 100)
        writer.add_file("data/part-0.parquet", path, remove=True)
        writer.flush()
        seen.append(store.outputs("benchmarks/"))
    assert seen == [[]] and not path.exists()  # sent, removed, not yet visible
    manifest = store.manifest("benchmarks/b")
    assert [f["path"] for f in manifest["files"]] == ["README.md", "data/part-0.parquet"]
    assert store.outputs("benchmarks/") == ["benchmarks/b"]
    # a complete output is left as it is
    with store.writer("benchmarks/b") as again:
        assert again.done == manifest
        again.add_bytes("README.md", b"other")
    assert (tmp_path / "store" / "benchmarks" / "b" / "README.md").read_bytes() == b"# card"
    with store.writer("out/c") as copy:
        copy.add_copy("same.md", "benchmarks/b/README.md", 6, manifest["files"][0]["sha256"])
    assert (tmp_path / "store" / "out" / "c" / "same.md").read_bytes() == b"# card"


def test_a_full_or_refusing_local_store_stops_with_one_line(tmp_path, monkeypatch):
    store = LocalStore(tmp_path / "store")

    def full(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with pytest.raises(StorageError) as info:
        store.write_bytes("work/render/k/images/c/minimal.png", b"png")
    text = str(info.value)
    assert "\n" not in text and store.uri in text and "work/render/k/images/c/minimal.png" in text
    assert "disk is full" in text and "re-run the step" in text
    for code, reason in ((errno.EACCES, "Permission denied"), (errno.EROFS, "Read-only")):

        def refuse(*args, code=code, reason=reason, **kwargs):  # noqa: ANN002, ANN003, ANN202
            raise OSError(code, reason)

        monkeypatch.setattr(Path, "write_bytes", refuse)
        with pytest.raises(StorageError) as info:
            store.write_bytes("work/x", b"1")
        assert "refuses the write" in str(info.value) and "work/x" in str(info.value)
    monkeypatch.undo()
    assert not list((tmp_path / "store").rglob("minimal.png"))  # nothing half-written
    assert not [p for p in (tmp_path / "store").rglob("*") if p.is_file()]


def test_range_file_reads_ahead_only_in_sequence():
    data = bytes(range(256)) * 1000
    calls = []

    def fetch(offset, length):  # noqa: ANN001, ANN202
        calls.append((offset, length))
        return data[offset : offset + length]

    f = RangeFile(fetch, len(data), "k", block=4096)
    f.seek(-8, io.SEEK_END)
    assert f.read(8) == data[-8:] and calls == [(len(data) - 8, 8)]  # a footer: itself only
    f.seek(100)
    assert f.read(10) == data[100:110]
    assert f.read(10) == data[110:120] and calls[-1] == (110, 4096)  # in sequence: a block
    assert f.read(100) == data[120:220] and len(calls) == 3  # served from the block
    table = pa.table({"x": list(range(5000))})
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=500)
    raw = buffer.getvalue()
    opened = pq.ParquetFile(RangeFile(lambda o, n: raw[o : o + n], len(raw), "t", block=2048))
    assert opened.read(columns=["x"]).equals(table)


def test_ordered_map_keeps_order_and_bounds_what_it_holds():
    held, peak, lock = [0], [0], threading.Lock()

    def work(i):  # noqa: ANN001, ANN202
        with lock:
            held[0] += 1
            peak[0] = max(peak[0], held[0])
        time.sleep(0.002 * (i % 3))
        return i * i

    out = []
    for value in ordered_map(work, range(60), workers=4, ahead=6):
        out.append(value)
        with lock:
            held[0] -= 1
    assert out == [i * i for i in range(60)] and peak[0] <= 6
    with pytest.raises(ZeroDivisionError):
        list(ordered_map(lambda i: 1 // (i - 5), range(10), workers=3))
    assert list(read_ahead(iter(range(7)), depth=2)) == list(range(7))
    with pytest.raises(ValueError):
        list(read_ahead((int(x) for x in ["1", "x"]), depth=2))


def test_image_references_stay_inside_their_root(tmp_path):
    store = LocalStore(tmp_path / "store")
    images = StoreImages(store, "work/render/k")
    images.write("images/c1/minimal.png", b"png-bytes")
    assert images.present("images") == {"images/c1/minimal.png"}
    opened = images.open_many(["images/c1/minimal.png", "images/none.png", "../../etc/passwd"])
    assert opened[0].read() == b"png-bytes" and isinstance(opened[1], FileNotFoundError)
    assert isinstance(opened[2], OutsideRoot)
    folder = ImageFolder(tmp_path / "store" / "work" / "render" / "k")
    assert folder.read("images/c1/minimal.png") == b"png-bytes"
    assert isinstance(folder.open_many(["/etc/passwd"])[0], OutsideRoot)


def test_a_summary_read_part_by_part_equals_the_whole_one():
    rows = [dict(model="m", sample_id=f"s{i}", family="color" if i % 4 else "position", n=2 + i % 2,
                 condition="minimal", set="swap" if i % 3 else "confusion", protocol="paper",
                 candidates=2 + i % 5, correct=i % 2 == 0, tie=i % 7 == 0, predicted=0,
                 positive_score=1.0, best_negative_score=0.5, failed=i % 11 == 0, reason="",
                 truncated=i % 5 == 0, score_type="score", options=None)
            for i in range(200)]  # fmt: skip
    table = pa.Table.from_pylist(rows, PREDICTIONS_SCHEMA)

    class Whole(ScoreRun):
        def read_predictions(self) -> pa.Table:
            return table

    whole = Whole("/nonexistent").summarize()
    parts = summarize_parts([table.slice(0, 37), table.slice(37, 100), table.slice(137)])
    assert parts.schema == whole.schema
    exact = [c for c in whole.column_names if c not in ("chance", "accuracy")]
    assert parts.select(exact).equals(whole.select(exact))
    for column in ("chance", "accuracy"):
        for a, b in zip(parts[column].to_pylist(), whole[column].to_pylist()):
            assert a == pytest.approx(b, rel=1e-12)


def test_a_journal_resumes_from_its_contiguous_committed_parts(tmp_path):
    store = LocalStore(tmp_path / "store")
    schema = pa.schema([("sample_id", pa.string()), ("outcome", pa.string())])
    journal = TableJournal(store, "work/validate/k", "verdicts", 2, schema)
    record = {"input_sha256": "abc"}
    assert journal.resume(1, record) == []
    journal.commit(1, record, [{"sample_id": "a", "outcome": "pass"}])
    journal.commit(1, record, [{"sample_id": "b", "outcome": "fail"}])
    again = TableJournal(store, "work/validate/k", "verdicts", 2, schema)
    assert [r["sample_id"] for r in again.resume(1, record)] == ["a", "b"]
    assert again.resume(1, {"input_sha256": "other"}) == []  # another input: nothing reused
    assert again.resume(0, record) == []


def test_a_location_is_a_small_manifest(tmp_path):
    where = Location("s3://bucket/runs", "work/render/0123", {"num_shards": 4})
    path = where.write(tmp_path / "artifact")
    assert json.loads(path.read_text()) == {"store": "s3://bucket/runs",
                                            "prefix": "work/render/0123", "num_shards": 4}  # fmt: skip
    assert Location.read(tmp_path / "artifact") == where and where.key("x") == "work/render/0123/x"
    with pytest.raises(UsageError):
        LocalStore(tmp_path).write_bytes("../escape", b"")
