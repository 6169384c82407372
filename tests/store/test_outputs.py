"""The one output-path rule (store/outputs.py): outputs create their parent folders, a path under
a file is refused, and a write that fails leaves none of the folders it made."""

from __future__ import annotations

import pytest

from autocomp.errors import UsageError
from autocomp.store.atomic import atomic_folder, atomic_path, scratch_folder, write_text
from autocomp.store.outputs import check_output, made_parents, output_folder


def test_missing_parents_pass_the_check_and_are_not_made(tmp_path):
    out = tmp_path / "runs" / "a" / "scores"
    assert check_output(out) == out
    assert not (tmp_path / "runs").exists()  # the check creates nothing


def test_a_path_under_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    for path in (tmp_path / "f" / "x", tmp_path / "f" / "x" / "y.parquet"):
        with pytest.raises(UsageError, match=r"lies under .*f, which is a file"):
            check_output(path)


def test_a_dangling_link_above_is_refused(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    with pytest.raises(UsageError, match="which is a file"):
        check_output(tmp_path / "link" / "x")


def test_the_first_write_makes_the_parents(tmp_path):
    write_text(tmp_path / "a" / "b" / "c.txt", "hello")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "hello"
    with atomic_folder(tmp_path / "d" / "e") as work:
        (work / "x").write_text("1")
    assert (tmp_path / "d" / "e" / "x").read_text() == "1"


@pytest.mark.parametrize(
    "block",
    [
        lambda p: atomic_path(p / "a" / "b" / "c.txt"),
        lambda p: atomic_folder(p / "a" / "b" / "c"),
        lambda p: scratch_folder(p / "a" / "b" / "c"),
        lambda p: made_parents(p / "a" / "b" / "c"),
        lambda p: output_folder(p / "a" / "b"),
    ],
)
def test_a_failed_write_takes_back_the_folders_it_made(tmp_path, block):
    (tmp_path / "keep").mkdir()
    with pytest.raises(RuntimeError), block(tmp_path):
        assert (tmp_path / "a").is_dir()
        raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep"]


def test_a_folder_that_holds_files_stays_after_a_failure(tmp_path):
    with pytest.raises(RuntimeError), output_folder(tmp_path / "a" / "b"):
        (tmp_path / "a" / "other.txt").write_text("someone else's")
        raise RuntimeError("boom")
    assert (tmp_path / "a" / "other.txt").is_file()
    assert not (tmp_path / "a" / "b").exists()
