"""What the store's readers check (issue 34): a published part changed in place is refused on
every route before anything is read from it; a committed score part copied under a new number
is published once and reported; one cut in half is one line naming it and the fix; two score
steps committing to one store leave one published run and no committed part; bad manifests and
URIs are one line."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from autocomp.config import ScoreConfig
from autocomp.errors import UsageError
from autocomp.store.local import LocalStore
from autocomp.store.publish import publish_stage
from autocomp.store.storage import StorageError
from autocomp.store.stores import open_store
from tests.store.test_publish import _benchmark


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A benchmark published into a local store (12 items)."""
    d = tmp_path_factory.mktemp("published")
    bench = _benchmark(d)
    publish_stage(bench, d / "render", d / "work", str(d / "store"), "b1")
    return d


def _tampered(published, tmp_path):
    """A copy of the store whose first data part has one byte changed, same size."""
    store = tmp_path / "store"
    shutil.copytree(published / "store", store)
    part = next((store / "benchmarks" / "b1" / "data").glob("*.parquet"))
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    return str(store)


def test_a_part_changed_in_place_is_refused_on_every_route(published, tmp_path):
    from autocomp.scoring import score
    from autocomp.store.catalog.benchmarks import fetch_view, open_published
    from autocomp.store.publish import copy_rows, fetch_benchmark

    store = _tampered(published, tmp_path)
    routes = {
        # the pipelines' score and fine-tuning steps: streamed from the store by range
        "streamed": lambda: list(open_published(store, "b1").batches()),
        # score --store (the CLI): fetched into a cache folder first
        "score --store": lambda: score(
            ["tiny-clip"], "b1", tmp_path / "s", ScoreConfig(), store=store
        ),  # fmt: skip
        "fetch": lambda: fetch_benchmark(store, "b1", tmp_path / "f", tmp_path / "f.parquet"),
        "report --store": lambda: fetch_view(store, "benchmarks/b1", tmp_path / "view"),
        "subset": lambda: copy_rows(
            open_published(store, "b1"),
            lambda b: b.column(0).is_valid(),
            store,
            "subsets/x",
            tmp_path / "w",
            {},
        ),  # fmt: skip
    }
    for name, route in routes.items():
        with pytest.raises(StorageError) as info:
            route()
        text = str(info.value)
        assert "\n" not in text and "does not match" in text and "data/test-0" in text, (name, text)
    assert LocalStore(store).manifest("subsets/x") is None  # nothing was published from it


def test_bad_manifests_and_uris_are_one_line(tmp_path):
    store = LocalStore(tmp_path / "s")
    (tmp_path / "s" / "a").mkdir(parents=True)
    for body, what in ((b"\x00garbage{", "not JSON"), (b'{"files": {"x": 1}}', "not a list"),
                       (b'{"files": [{"path": "../x", "size": 1, "sha256": "' + b"0" * 64
                        + b'"}]}', "unsafe path")):  # fmt: skip
        (tmp_path / "s" / "a" / "_manifest.json").write_bytes(body)
        with pytest.raises(StorageError, match=what) as info:
            store.manifest("a")
        assert "\n" not in str(info.value)
    for uri, why in (("file://mystore/sub", "names the host 'mystore'"),
                     ("file:rel/sub", "not an absolute"),
                     ("s3://user:secret@bucket/p", "holds credentials"),
                     ("s3://bucket/a/../b", "'..'"), ("s3://bucket/a//b", "empty"),
                     ("s3://Bad_Bucket/p", "must name a bucket")):  # fmt: skip
        with pytest.raises(UsageError, match=why) as info:
            open_store(uri)
        assert "secret" not in str(info.value)
    assert open_store(f"file://localhost{tmp_path}/x").uri == (tmp_path / "x").as_uri()


def test_an_output_never_lies_in_a_local_store(published, tmp_path):
    from autocomp.analysis.report import report_from_store
    from autocomp.scoring import score

    store = published / "store"
    for out in (store, store / "benchmarks" / "b1" / "scores", store.parent):
        with pytest.raises(UsageError, match="the input store"):
            score(["tiny-clip"], "b1", out, ScoreConfig(), store=str(store))
        with pytest.raises(UsageError, match="the input store"):
            report_from_store(str(store), "b1", out)
    manifest = json.loads((store / "benchmarks" / "b1" / "_manifest.json").read_text())
    tops = {f["path"].split("/")[0] for f in manifest["files"]} | {"_manifest.json"}
    assert {p.name for p in (store / "benchmarks" / "b1").iterdir()} == tops  # nothing new
    assert sorted(p.name for p in store.iterdir()) == ["benchmarks"]


# ----------------------------------------------------------------------------- committed parts


def _score(store, out):
    from autocomp.scoring import score

    config = ScoreConfig(device="cpu", max_candidates=20)  # several parts of 12 items
    return score(["tiny-clip"], "b1", out, config, store=str(store), results="results/b1")


def _killed_at_publish(published, tmp_path, monkeypatch):
    """A store whose score run committed its parts and was killed before it published."""
    from autocomp.scoring import runstore

    store = tmp_path / "store"
    shutil.copytree(published / "store", store)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(runstore.Results, "publish", killed)
        with pytest.raises(KeyboardInterrupt):
            _score(store, tmp_path / "a")
    parts = sorted((store / "work" / "score").glob("*/part-*"))
    assert len(parts) >= 2, parts
    return store, parts


@pytest.mark.slow
def test_a_copied_part_is_published_once_and_reported(published, tmp_path, monkeypatch, capsys):
    store, parts = _killed_at_publish(published, tmp_path, monkeypatch)
    copy = parts[0].with_name("part-00042")
    shutil.copytree(parts[0], copy)  # the same items under a new part number
    for sub in ("scores", "predictions"):
        (copy / sub / "part-00000.parquet").rename(copy / sub / "part-00042.parquet")
    manifest = json.loads((copy / "_manifest.json").read_text())
    for f in manifest["files"]:
        f["path"] = f["path"].replace("part-00000", "part-00042")
    (copy / "_manifest.json").write_text(json.dumps(manifest))
    once = sum(pq.read_table(next((p / "predictions").glob("*.parquet"))).num_rows for p in parts)
    _score(store, tmp_path / "b")
    assert "part-00042 holds the same" in capsys.readouterr().err
    predictions = LocalStore(store).manifest("results/b1/tiny-clip")["files"]
    assert not any("part-00042" in f["path"] for f in predictions)
    rows = sum(pq.read_table(store / "results" / "b1" / "tiny-clip" / f["path"]).num_rows
               for f in predictions if f["path"].startswith("predictions/"))  # fmt: skip
    assert rows == once  # each item once
    assert pq.read_table(tmp_path / "b" / "tiny-clip" / "summary.parquet").equals(
        pq.read_table(store / "results" / "b1" / "tiny-clip" / "summary.parquet")
    )
    assert not list((store / "work" / "score").glob("*/part-*"))


@pytest.mark.slow
def test_a_committed_part_cut_in_half_is_one_line(published, tmp_path, monkeypatch):
    store, parts = _killed_at_publish(published, tmp_path, monkeypatch)
    target = parts[1] / "predictions" / f"{parts[1].name}.parquet"
    target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    with pytest.raises(StorageError) as info:
        _score(store, tmp_path / "b")
    text = str(info.value)
    assert "\n" not in text and parts[1].name in text and "delete" in text and "re-run" in text
    assert LocalStore(store).manifest("results/b1/tiny-clip") is None


@pytest.mark.slow
def test_two_score_steps_on_one_store_leave_one_run_and_no_part(published, tmp_path, monkeypatch):
    from autocomp.scoring import runstore

    first = tmp_path / "first"
    shutil.copytree(published / "store", first)
    expected = _score(first, tmp_path / "a")
    second = tmp_path / "second"
    shutil.copytree(published / "store", second)
    real = runstore.StoredRun.commit

    def other_step_publishes(self, index):  # the other step publishes while this one scores
        if not (second / "results" / "b1" / "tiny-clip").exists():
            shutil.copytree(first / "results" / "b1" / "tiny-clip",
                            second / "results" / "b1" / "tiny-clip")  # fmt: skip
        real(self, index)

    monkeypatch.setattr(runstore.StoredRun, "commit", other_step_publishes)
    got = _score(second, tmp_path / "b")
    assert got.equals(expected)
    assert not list((second / "work" / "score").glob("*/part-*"))
    assert (second / "results" / "b1" / "tiny-clip" / "_manifest.json").read_bytes() == (
        first / "results" / "b1" / "tiny-clip" / "_manifest.json"
    ).read_bytes()
