"""The study in Label Studio: projects exported from a study folder (tasks JSON + labeling
config), Label Studio's JSON export of their annotations read back into the journals, and
`audit collect` giving the same CSVs as answers clicked in `audit serve`."""

from __future__ import annotations

import base64
import json
import xml.etree.ElementTree as ET

import pytest

from autocomp.audit.collect import collect_stage
from autocomp.audit.labelstudio import export_labelstudio, import_labelstudio
from autocomp.audit.study import Study
from autocomp.errors import UsageError


def annotated(tasks: list[dict], pick, cancelled_first: bool = False) -> list[dict]:
    """Label Studio's JSON export of annotated tasks: each task as imported, with an `id` and
    its `annotations` (the result region of the Choices tag: from_name, to_name, type, value)."""
    out = []
    for number, task in enumerate(tasks):
        options = task["data"]["options"]
        chosen = pick(number, options)
        annotations = []
        if cancelled_first:
            annotations.append({"id": 1, "was_cancelled": True, "result": []})
        if chosen is not None:
            annotations.append({
                "id": 2, "completed_by": 1, "was_cancelled": False, "result": [{
                    "id": "r1", "from_name": "answer", "to_name": "image", "type": "choices",
                    "origin": "manual", "value": {"choices": [chosen]},
                }],
            })  # fmt: skip
        out.append({"id": number + 1, "data": task["data"], "annotations": annotations})
    return out


def test_export_writes_one_project_per_annotator(study, tmp_path):
    counts = export_labelstudio(study, tmp_path / "ls")
    loaded = Study(study)
    assert counts == {name: len(items) for name, items in loaded.items.items()}
    config = ET.fromstring((tmp_path / "ls" / "labeling_config.xml").read_text())
    choices = config.find("Choices")
    assert choices is not None and choices.get("value") == "$options"
    assert choices.get("toName") == config.find("Image").get("name")
    for name, items in loaded.items.items():
        tasks = json.loads((tmp_path / "ls" / name / "tasks.json").read_text())
        for position, (task, item) in enumerate(zip(tasks, items)):
            data = task["data"]
            assert data["prompt"] == item["prompt"] and data["item"] == position
            assert [o["value"] for o in data["options"]] == item["options"]
            png = base64.b64decode(data["image"].split(",", 1)[1])
            assert png == loaded.image(name, position).read_bytes()
    with pytest.raises(UsageError, match="exists.*--force"):
        export_labelstudio(study, tmp_path / "ls")


def test_answers_from_label_studio_collect_as_served_ones(study, tmp_path):
    export_labelstudio(study, tmp_path / "ls")
    loaded = Study(study)
    exports = tmp_path / "exports"
    exports.mkdir()
    picks = {}
    for name in loaded.items:
        tasks = json.loads((tmp_path / "ls" / name / "tasks.json").read_text())

        # the alias (the option's index) for even tasks, the option's text for odd ones
        def pick(n, options, name=name):
            k = (n * 7 + len(name)) % len(options)
            picks[(name, n)] = k
            return options[k]["alias"] if n % 2 == 0 else options[k]["value"]

        (exports / f"{name}.json").write_text(json.dumps(annotated(tasks, pick, True)))
    counts = import_labelstudio(study, exports)
    assert counts == {name: len(items) for name, items in loaded.items.items()}
    for name in loaded.items:
        assert loaded.answers(name) == {n: k for (a, n), k in picks.items() if a == name}
    summary = collect_stage(study, tmp_path / "run" / "human")
    assert all(p["complete"] for p in summary.values())


def test_another_studys_export_is_refused_before_anything_is_written(study, tmp_path, bench_root):
    from autocomp.audit.config import AuditConfig
    from autocomp.audit.export import export_study

    export_study(bench_root / "benchmark.parquet", tmp_path / "other",
                 AuditConfig(concepts=4, annotators=3, rejected=2, seed=8), None)  # fmt: skip
    export_labelstudio(tmp_path / "other", tmp_path / "ls")
    tasks = json.loads((tmp_path / "ls" / "V1" / "tasks.json").read_text())
    export = tmp_path / "export.json"
    export.write_text(json.dumps(annotated(tasks, lambda n, o: o[0]["alias"])))
    with pytest.raises(UsageError, match="not a task of this study"):
        import_labelstudio(study, export)
    assert Study(study).answers("V1") == {}


def test_a_choice_that_is_no_option_is_refused(study, tmp_path):
    export_labelstudio(study, tmp_path / "ls")
    tasks = json.loads((tmp_path / "ls" / "V2" / "tasks.json").read_text())
    export = tmp_path / "export.json"
    export.write_text(json.dumps(annotated(tasks, lambda n, o: "<b>none of these</b>")))
    with pytest.raises(UsageError, match="task 0.*not one option"):
        import_labelstudio(study, export)
    assert Study(study).answers("V2") == {}
