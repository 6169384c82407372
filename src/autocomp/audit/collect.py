"""`autocomp audit collect`: the study's answers as the CSVs `autocomp report` reads.

RUN/human/<annotator>.csv            annotator,sample_id,task,answer: `swap` / `confusion` with
                                     the chosen caption, `valid` yes when every validity question
                                     of the image was answered yes (only images whose questions
                                     were all answered)
RUN/human/questions/<annotator>.csv  annotator,sample_id,question,answer: each validity answer
RUN/human/audit.json                 provenance: the study's config, seed, version and counts
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from autocomp.audit.config import KEY_FILE
from autocomp.audit.study import Study
from autocomp.errors import UsageError
from autocomp.store.atomic import write_json, write_text
from autocomp.store.tables import provenance


def _write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    write_text(path, buffer.getvalue())


def collected_rows(study: Study) -> tuple[dict[str, list[list[str]]], dict[str, list[list[str]]]]:
    """Per annotator: the report rows and the per-question validity rows."""
    key = {r["key"]: r for r in pq.read_table(study.root / KEY_FILE).to_pylist()}
    human: dict[str, list[list[str]]] = {}
    questions: dict[str, list[list[str]]] = {}
    for name, items in study.items.items():
        answers = study.answers(name)
        rows, asked = [], []
        validity: dict[str, list[str | None]] = defaultdict(list)
        order: list[str] = []
        for position, item in enumerate(items):
            k = key[item["key"]]
            chosen = answers.get(position)
            option = None if chosen is None else item["options"][chosen]
            if k["task"] == "valid":
                if k["sample_id"] not in validity:
                    order.append(k["sample_id"])
                validity[k["sample_id"]].append(option)
                if option is not None:
                    asked.append([name, k["sample_id"], k["question"], option])
            elif option is not None:
                rows.append([name, k["sample_id"], k["task"], option])
        for sample in order:
            said = validity[sample]
            if all(a is not None for a in said):
                valid = "yes" if all(a == "yes" for a in said) else "no"
                rows.append([name, sample, "valid", valid])
        human[name], questions[name] = rows, asked
    return human, questions


def collect_stage(study_dir: str | Path, out: str | Path) -> dict[str, Any]:
    """Write the CSVs into `out` (RUN/human/); return answered and open items per annotator."""
    study = Study(study_dir)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError("out", str(out), "is a file; give a folder (RUN/human/)")
    if not out.parent.is_dir():
        raise UsageError("out", str(out), f"folder {out.parent} does not exist")
    (out / "questions").mkdir(parents=True, exist_ok=True)
    human, questions = collected_rows(study)
    summary: dict[str, Any] = {}
    for name in study.items:
        _write_csv(out / f"{name}.csv", ["annotator", "sample_id", "task", "answer"], human[name])
        _write_csv(
            out / "questions" / f"{name}.csv",
            ["annotator", "sample_id", "question", "answer"],
            questions[name],
        )
        answered = len(study.answers(name))
        summary[name] = {"answered": answered, "open": len(study.items[name]) - answered}
    manifest = study.manifest
    document = provenance(
        "human_annotations",
        config=manifest.get("config"),
        benchmark=manifest.get("benchmark"),
        study_made_by=manifest.get("autocomp_version"),
        answers=summary,
    )
    write_json(out / "audit.json", document)
    return summary
