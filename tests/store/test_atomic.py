"""The one atomic-write helper and the one stale-temporary sweeper (store/atomic.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autocomp.store import atomic

DEAD = 999_999_999  # above every kernel's pid_max: never a running process


class Killed(Exception):
    """Stands for the run dying half-way through a write."""


def test_a_write_killed_half_way_leaves_nothing_under_the_final_name(tmp_path):
    target = tmp_path / "table.parquet"
    with pytest.raises(Killed), atomic.atomic_path(target) as tmp:
        tmp.write_bytes(b"half a table")
        raise Killed
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []  # and its temporary went with it
    target.write_bytes(b"the old table")
    with pytest.raises(Killed), atomic.atomic_path(target) as tmp:
        tmp.write_bytes(b"half of a new one")
        raise Killed
    assert target.read_bytes() == b"the old table"  # a failed rewrite keeps the old file whole
    atomic.write_text(target, "done")
    assert target.read_text() == "done" and list(tmp_path.iterdir()) == [target]


def test_a_folder_killed_half_way_leaves_nothing_and_a_finished_one_appears_whole(tmp_path):
    out = tmp_path / "study"
    with pytest.raises(Killed), atomic.atomic_folder(out) as work:
        (work / "key.parquet").write_bytes(b"...")
        raise Killed
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with atomic.atomic_folder(out) as work:
        (work / "a").write_text("1")
        assert not out.exists()  # nothing under the final name until the block ends
    assert [p.name for p in out.iterdir()] == ["a"] and list(tmp_path.iterdir()) == [out]


def test_a_folder_replaces_an_old_one_only_when_asked(tmp_path):
    out = tmp_path / "bench"
    out.mkdir()
    (out / "old").write_text("old")
    with pytest.raises(FileExistsError), atomic.atomic_folder(out) as work:
        (work / "new").write_text("new")
    assert [p.name for p in out.iterdir()] == ["old"]
    with pytest.raises(Killed), atomic.atomic_folder(out, replace=True) as work:
        (work / "new").write_text("new")
        raise Killed
    assert [p.name for p in out.iterdir()] == ["old"]  # a failed replacement keeps the old one
    with atomic.atomic_folder(out, replace=True) as work:
        (work / "new").write_text("new")
    assert [p.name for p in out.iterdir()] == ["new"] and list(tmp_path.iterdir()) == [out]


def test_write_json_sorts_keys_and_writes_the_bytes_json_dumps_writes(tmp_path):
    atomic.write_json(tmp_path / "a.json", {"b": 1, "a": [1, 2]})
    assert (tmp_path / "a.json").read_text() == '{\n "a": [\n  1,\n  2\n ],\n "b": 1\n}'


def test_the_sweeper_removes_dead_writers_temporaries_and_keeps_a_live_ones(tmp_path):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead_file = tmp_path / f".table.parquet.tmp-{DEAD}-0123abcd"
        dead_folder = tmp_path / f".study.tmp-{DEAD}-89abcdef"
        dead_folder.mkdir()
        (dead_folder / "part").write_text("x")
        old_shapes = [
            tmp_path / f".table.parquet.tmp-{DEAD}",  # the previous version's shapes
            tmp_path / f".report.report-{DEAD}",
            tmp_path / f".fetch-{DEAD}",
            tmp_path / f".bench-replaced.tmp-{DEAD}",
        ]
        kept = [
            tmp_path / f".table.parquet.tmp-{live.pid}-0123abcd",  # a live process's
            tmp_path / f".mine.tmp-{os.getpid()}-0123abcd",  # this process's
            tmp_path / "table.parquet",  # outputs and other hidden files
            tmp_path / ".gitignore",
            tmp_path / f"table.tmp-{DEAD}",  # not hidden: not ours
            tmp_path / f".table.tmp-{DEAD}-xyz",
        ]
        for path in [dead_file, *old_shapes, *kept]:
            path.write_text("x")
        removed = atomic.sweep_stale(tmp_path)
        assert removed == sorted([dead_file, dead_folder, *old_shapes])
        assert sorted(tmp_path.iterdir()) == sorted(kept)
        assert atomic.sweep_stale(tmp_path) == []
        assert atomic.sweep_stale(tmp_path / "missing") == []
    finally:
        live.kill()
        live.wait()


names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0"), min_size=1
).filter(lambda s: s not in (".", ".."))


@given(names)
def test_every_temporary_name_has_the_one_shape_and_names_its_target_and_writer(name):
    first, second = atomic.temp_path(f"/x/{name}"), atomic.temp_path(f"/x/{name}")
    assert first != second and first.parent == second.parent == Path("/x")
    match = atomic.TEMP_NAME.fullmatch(first.name)
    assert match and match["name"] == name and int(match["pid"]) == os.getpid()
    assert atomic.is_temporary(first.name) == os.getpid()
    assert first.name.startswith(".")  # hidden: listings of outputs skip it


@given(names)
def test_an_output_name_is_never_taken_for_a_temporary(name):
    if not name.startswith("."):
        assert atomic.is_temporary(name) is None
