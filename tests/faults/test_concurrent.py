"""Fault tests for concurrent writers of one output: two `import ... --out X` started together
without --force cannot both succeed (importers/output.building: the rename into X refuses a
folder another import finished first); X holds exactly one of them, whole."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from autocomp.importers.output import building

pytestmark = pytest.mark.slow


def _sugar(folder: Path, colour: str, items: int) -> Path:
    """A SugarCrepe category file of `items` items whose captions name `colour`."""
    (folder / "imgs").mkdir(parents=True)
    data = {}
    for i in range(items):
        Image.new("RGB", (24, 24), (i % 256, 40, 90)).save(folder / "imgs" / f"{i}.jpg")
        data[str(i)] = {"filename": f"{i}.jpg", "caption": f"a {colour} cup number {i}",
                        "negative_caption": f"a plain cup number {i}"}  # fmt: skip
    (folder / "swap_att.json").write_text(json.dumps(data))
    return folder


def _env() -> dict[str, str]:
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(p for p in (str(root / "src"), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1"}


def _import(source: Path, out: Path) -> subprocess.Popen:
    argv = ["import", "sugarcrepe", "--source", str(source / "swap_att.json"), "--images",
            str(source / "imgs"), "--out", str(out)]  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "autocomp.cli.main", *argv],
        env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.parametrize("attempt", range(2))
def test_two_imports_into_one_new_folder_one_wins_whole(tmp_path, attempt):
    sources = {c: _sugar(tmp_path / c, c, 300) for c in ("red", "green")}
    out = tmp_path / "bench"
    procs = {c: _import(s, out) for c, s in sources.items()}
    done = {c: (p.wait(300), p.stderr.read()) for c, p in procs.items()}
    codes = sorted(code for code, _ in done.values())
    assert codes == [0, 2], done
    (winner,) = [c for c, (code, _) in done.items() if code == 0]
    (loser_err,) = [err for code, err in done.values() if code == 2]
    assert loser_err.count("\n") == 1 and "Traceback" not in loser_err, loser_err
    assert "--out" in loser_err and "--force" in loser_err
    report = json.loads((out / "import_report.json").read_text())
    assert json.dumps(report).count("swap_att.json") >= 1
    import pyarrow.parquet as pq

    captions = pq.read_table(out / "data", columns=["caption"]).column(0).to_pylist()
    assert captions and all(winner in c for c in captions)  # the winner's, whole
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries


def test_a_folder_finished_by_another_writer_is_not_replaced_without_force(tmp_path):
    """The mechanism, without timing: while one build runs, another finishes X first."""
    from autocomp.errors import UsageError

    out = tmp_path / "bench"
    with pytest.raises(UsageError, match="another import"), building(out, force=False) as mine:
        (mine / "mine.txt").write_text("mine")
        with building(out, force=False) as theirs:
            (theirs / "theirs.txt").write_text("theirs")
    assert sorted(p.name for p in out.iterdir()) == ["theirs.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench"]
    with building(out, force=True) as forced:  # --force replaces it
        (forced / "forced.txt").write_text("forced")
    assert sorted(p.name for p in out.iterdir()) == ["forced.txt"]
