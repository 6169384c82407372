import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from autocomp import __version__
from autocomp.cli.main import main
from autocomp.config import NegativesConfig
from autocomp.errors import UsageError
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.store.catalog.schemas import CONCEPTS_SCHEMA
from autocomp.store.tables import read_metadata


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "autocomp.cli.main", *args], capture_output=True, text=True
    )


def test_sample_writes_schema_and_provenance(tmp_path, color):
    out = tmp_path / "c.parquet"
    table = sample_stage("color", 2, 40, 9, out)
    assert table.num_rows == 40
    read = pq.read_table(out)
    assert read.schema.remove_metadata() == CONCEPTS_SCHEMA
    meta = read_metadata(out)
    assert (
        meta["table"] == "concepts"
        and meta["seed"] == 9
        and meta["autocomp_version"] == __version__
    )
    assert meta["families"]["color"]["sha256"] == color.sha256
    assert meta["families"]["color"]["config"]["attributes"]["entries"][0] == {"name": "red"}
    assert sum(meta["label_prior"]["labels"].values()) == 80
    assert meta["distinct_concepts"] > 1_000_000


def test_same_seed_gives_byte_identical_parquet(tmp_path):
    a, b, c = (tmp_path / f"{x}.parquet" for x in "abc")
    sample_stage("position", 3, 50, 1, a)
    sample_stage("position", 3, 50, 1, b)
    sample_stage("position", 3, 50, 2, c)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    ba, bb = tmp_path / "ba.parquet", tmp_path / "bb.parquet"
    negatives_stage(a, ba, NegativesConfig(workers=1, batch_size=7))
    negatives_stage(a, bb, NegativesConfig(workers=2, batch_size=7))
    assert ba.read_bytes() == bb.read_bytes()


def test_negatives_from_concepts_table(tmp_path):
    concepts = tmp_path / "c.parquet"
    sample_stage("shape_color", 3, 30, 0, concepts)
    out = tmp_path / "b.parquet"
    summary = negatives_stage(concepts, out, NegativesConfig(workers=1))
    assert summary == {"rows": 30, "swap": 150, "confusion": 30 * 728, "vary": 0}
    rows = pq.read_table(out).to_pylist()
    row = rows[0]
    assert row["caption"] == row["minimal_caption"] and not row["caption_rewritten"]
    assert row["protocol"] == "paper" and row["confusion_chance"] == pytest.approx(1 / 729)
    assert row["vary_attribute_chance"] is None
    meta = read_metadata(out)
    assert meta["table"] == "benchmark" and meta["protocol"] == "paper"
    assert meta["input_metadata"]["seed"] == 0 and "shape_color" in meta["families"]


def test_negatives_from_a_curated_table_keeps_the_source_caption(tmp_path, color):
    curated = pa.table(
        {
            "concept_id": ["x1"],
            "family": ["color"],
            "n": pa.array([2], pa.int8()),
            "objects": [["cup", "lamp"]],
            "attributes": [["orange", "red"]],
            "condition": ["contextual"],
            "caption": ["In the hall a orange cup stands by a red lamp."],
        }
    )
    pq.write_table(curated, tmp_path / "cur.parquet")
    negatives_stage(tmp_path / "cur.parquet", tmp_path / "b.parquet", NegativesConfig("strict", 1))
    row = pq.read_table(tmp_path / "b.parquet").to_pylist()[0]
    assert row["source_caption"] == "In the hall a orange cup stands by a red lamp."
    assert (
        row["caption"] == "In the hall an orange cup stands by a red lamp."
        and row["caption_rewritten"]
    )
    assert row["swap_negatives"] == ["In the hall a red cup stands by an orange lamp."]
    assert len(row["confusion_negatives"]) == 14 and row["protocol"] == "strict"


@pytest.mark.parametrize("workers", [1, 2])
def test_failing_caption_leaves_no_partial_output(tmp_path, workers):
    rows = {
        "family": ["color"] * 600,
        "n": [2] * 600,
        "objects": [["cup", "lamp"]] * 600,
        "attributes": [["red", "green"]] * 600,
        "caption": ["A red cup and a green lamp."] * 599 + ["A green cup and a red lamp."],
    }
    pq.write_table(pa.table(rows), tmp_path / "cur.parquet")
    out = tmp_path / "b.parquet"
    # raised in a worker process, the error reaches the parent (no hang) and names the row
    with pytest.raises(UsageError, match="row 599: .*does not state its concept"):
        negatives_stage(
            tmp_path / "cur.parquet", out, NegativesConfig(workers=workers, batch_size=100)
        )
    assert list(tmp_path.iterdir()) == [tmp_path / "cur.parquet"]


def test_input_errors(tmp_path):
    pq.write_table(pa.table({"family": ["color"], "n": [2]}), tmp_path / "t.parquet")
    with pytest.raises(UsageError, match="missing column.*objects, attributes"):
        negatives_stage(tmp_path / "t.parquet", tmp_path / "o.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(UsageError, match="not a readable Parquet file"):
        negatives_stage(tmp_path / "junk.parquet", tmp_path / "o.parquet")
    with pytest.raises(UsageError, match="no such file"):
        negatives_stage(tmp_path / "none.parquet", tmp_path / "o.parquet")
    sample_stage("color", 2, 3, 0, tmp_path / "c.parquet")
    negatives_stage(tmp_path / "c.parquet", tmp_path / "b.parquet", NegativesConfig(workers=1))
    with pytest.raises(UsageError, match="it is a benchmark table"):
        negatives_stage(tmp_path / "b.parquet", tmp_path / "o.parquet")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="lies under .*file, which is a file"):
        negatives_stage(tmp_path / "c.parquet", tmp_path / "file" / "o.parquet")
    negatives_stage(tmp_path / "c.parquet", tmp_path / "new" / "o.parquet")  # parents are made
    assert (tmp_path / "new" / "o.parquet").is_file()
    (tmp_path / "new" / "o.parquet").unlink()
    with pytest.raises(UsageError, match="must end in .parquet"):
        sample_stage("color", 2, 3, 0, tmp_path / "c.csv")
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.parametrize("verb", ["families", "sample", "negatives", "demo"])
def test_every_verb_has_help(verb, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([verb, "--help"])
    assert exit_.value.code == 0
    assert "usage: autocomp " + verb in capsys.readouterr().out


def test_families_lists_vocabulary_sizes(capsys):
    assert main(["families"]) == 0
    out = capsys.readouterr().out
    assert "color" in out and "216" in out and "19 colors" in out and "N=1: 95" in out


def test_new_family_shows_up_in_the_cli(fixture_path, tmp_path, capsys):
    assert main(["families"]) == 0
    assert "material" in capsys.readouterr().out
    out = tmp_path / "m.parquet"
    assert (
        main(["sample", "--family", "material", "--n", "3", "--count", "20", "--out", str(out)])
        == 0
    )
    assert main(["negatives", "--input", str(out), "--out", str(tmp_path / "b.parquet")]) == 0
    assert pq.read_table(tmp_path / "b.parquet").num_rows == 20


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["sample", "--family", "colour", "--n", "2", "--count", "3", "--out", "x.parquet"], "did you mean 'color'"),
        (["sample", "--family", "position", "--n", "1", "--count", "3", "--out", "x.parquet"], "supports N from 2 to 3"),
        (["sample", "--family", "shape_color", "--n", "1", "--count", "500", "--out", "x.parquet"], "only 95"),
        (["negatives", "--input", "missing.parquet", "--out", "x.parquet"], "no such file"),
    ],
)  # fmt: skip
def test_usage_errors_exit_2_with_one_line(tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    result = run_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and lines[0].startswith("autocomp ")
    assert not (tmp_path / "x.parquet").exists()


def test_version_and_protocol_choice():
    assert __version__ in run_cli("--version").stdout
    bad = run_cli("negatives", "--input", "a.parquet", "--out", "b.parquet", "--protocol", "loose")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_demo_runs_every_family(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--count", "12"]) == 0
    out = capsys.readouterr().out
    for family in ("color", "shape_color", "position", "relative_size"):
        assert family in out
    assert "50.0/6.3" in out and "16.7/0.14" in out and "16.7/0.93" in out
    assert len(list(tmp_path.glob("benchmark_*.parquet"))) == 10
    assert "vary 18/" not in out and "sanity 18 attr / " in out  # labelled, and explained:
    assert "N=1 has no Swap or Confusion set" in out and "18 other attributes" in out
