"""What a newcomer is told (issue 34, items 11 and 13): a model whose weights are random says
so in its run record (autocomp.tiny's data, not its name), the report's opening lines and the
CLI's last lines; a cell resting on few items shows their count; a benchmark without verdicts
is never described as validated."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from autocomp.analysis.scope import Scope, weights_lines
from autocomp.analysis.scope import paired_set as _paired_set
from autocomp.analysis.wide import FEW_ITEMS, Cell
from autocomp.cli.table import random_weights_note
from autocomp.config import NegativesConfig, ScoreConfig
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.scoring.modes import run_record
from autocomp.scoring.registry import get_model
from autocomp.store.catalog.benchmarks import open_benchmark
from autocomp.tiny.common import weights_record


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bench")
    sample_stage("color", 2, 2, 0, folder / "concepts.parquet")
    negatives_stage(folder / "concepts.parquet", folder / "b.parquet", NegativesConfig(workers=1))
    return open_benchmark(folder / "b.parquet")


def test_the_tiny_models_record_random_weights_as_data(source):
    tiny = get_model("tiny-clip")
    assert run_record(tiny, source, ScoreConfig())["weights"]["random"] is True
    trained = get_model("clip-vit-b-16")
    assert run_record(trained, source, ScoreConfig())["weights"] == {"random": False}
    # the fact follows the registry's data, not the name: a renamed tiny entry is still random,
    # a "tiny-" name with real weights is not
    renamed = dataclasses.replace(tiny, name="my-model")
    assert run_record(renamed, source, ScoreConfig())["weights"]["random"] is True
    named = dataclasses.replace(trained, name="tiny-but-trained")
    assert run_record(named, source, ScoreConfig())["weights"] == {"random": False}


def test_a_model_fine_tuned_from_random_weights_is_still_random(source):
    finetuned = dataclasses.replace(
        get_model("clip-vit-b-16"), name="ft", weights="local-dir", base_model="tiny-clip"
    )
    weights = run_record(finetuned, source, ScoreConfig())["weights"]
    assert weights["random"] is True and "fine-tuned" in weights["how"]
    assert weights_record("local-dir", "laion2b_s34b_b88k") == {"random": False}
    unknown = dataclasses.replace(finetuned, base_model="not-registered")
    assert run_record(unknown, source, ScoreConfig())["weights"] == {"random": False}


def test_the_report_opens_with_the_random_weights():
    scope = Scope(samples={}, kinds={}, paired=None, random_weights={"tiny-clip": "random: x"})
    lines = scope.summary()
    assert (weights_lines({"tiny-clip": "random: x"})[0], True) in lines
    assert "tiny-clip" in lines[1][0] and "not what a model can do" in lines[1][0]
    assert not weights_lines({})
    trained = Scope(samples={}, kinds={}, paired=None)
    assert not any("weights" in line for line, _ in trained.summary())


def _run(folder: Path, weights: object) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"model": folder.name, "weights": weights}))
    return folder


def test_the_cli_note_reads_each_run_record(tmp_path):
    runs = [
        _run(tmp_path / "tiny-clip", weights_record("tiny")),
        _run(tmp_path / "clip", {"random": False}),
        _run(tmp_path / "old", None),  # a run.json written before the record had it
        tmp_path / "missing",
    ]
    (tmp_path / "garbage").mkdir()
    (tmp_path / "garbage" / "run.json").write_text("[1, 2")
    (note,) = random_weights_note([*runs, tmp_path / "garbage"])
    assert note.startswith("note: The weights of tiny-clip are random")
    assert "\n" not in note
    assert random_weights_note(runs[1:]) == []


@pytest.mark.parametrize("items, shown", [(1, "1 item"), (2, "2 items"), (FEW_ITEMS - 1, "")])
def test_a_cell_on_few_items_shows_their_count(items, shown):
    cell = Cell(1.0, 1.0, 1.0, items=items)
    assert cell.interval == f"[100.0, 100.0] {shown or f'{items} items'}"
    assert Cell(0.5, 0.4, 0.6, items=FEW_ITEMS).interval == "[40.0, 60.0]"
    assert Cell(0.5, 0.4, 0.6).interval == "[40.0, 60.0]"  # no count known: none shown


def test_no_validation_is_never_described_as_passed():
    assert "passed validation" in _paired_set(Scope({}, {}, None, validated=True))
    assert "passed validation" not in _paired_set(Scope({}, {}, None, validated=False))
    assert "records no validation" in _paired_set(Scope({}, {}, None, validated=False))


def test_a_failed_load_never_points_to_an_empty_summary(tmp_path):
    from autocomp.errors import UsageError, weights_error
    from autocomp.store.catalog.runs import report_failed

    with pytest.raises(UsageError) as none:
        report_failed(tmp_path, {"clip-vit-b-16": "weights could not be loaded"}, scored=0)
    assert "no model was scored" in none.value.fix and "summary.parquet" not in none.value.fix
    with pytest.raises(UsageError) as some:
        report_failed(tmp_path, {"clip-vit-b-16": "weights could not be loaded"}, scored=12)
    assert "the other models are scored in" in some.value.fix
    # score has no --profile: its way out names models, as `autocomp models` lists them
    from autocomp.errors import WITHOUT_PROFILE

    assert "--profile" not in weights_error("models", "m", OSError("x"), WITHOUT_PROFILE).fix
    assert "--profile tiny" in weights_error("captioner", "m", OSError("x")).fix


def test_a_collected_study_without_answers_is_noted_not_dropped(run_dir, tmp_path):
    import shutil

    from autocomp.analysis.load import load_run
    from autocomp.analysis.report import build_tables, section_notes

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    shutil.rmtree(run / "human", ignore_errors=True)
    (run / "human").mkdir()
    (run / "human" / "A1.csv").write_text("annotator,sample_id,task,answer\n")
    (run / "human" / "audit.json").write_text(json.dumps({"answers": {"A1": {"answered": 0}}}))
    built = build_tables(load_run(run))
    notes = section_notes(built.tables, built.notes)
    assert any("Tables 11 and 20 need at least one answered item" in n for n in notes), notes
    (run / "human" / "audit.json").unlink()  # CSVs made some other way, no study record
    assert "human" not in build_tables(load_run(run)).notes


def test_an_empty_table8_says_which_variant_is_missing():
    from autocomp.analysis.finetune_tables import table8_empty_reason

    def run(negatives: str, seed: int = 0, base: str = "tiny-clip") -> dict:
        return {"base_model": base, "negatives": negatives, "seed": seed}

    assert "finetune.json" in table8_empty_reason([])
    only = table8_empty_reason([run("confusion"), run("pretrained")])
    assert "tiny-clip: confusion only" in only and "--negatives" in only
    assert "swap, confusion" in table8_empty_reason([run("confusion", 0), run("swap", 1)])
    assert table8_empty_reason([run("confusion"), run("swap")]) is None
