"""`autocomp audit collect`: the study's answers as the CSVs `autocomp report` reads.

RUN/human/<annotator>.csv            annotator,sample_id,task,answer: `swap` / `confusion` with
                                     the chosen caption, `valid` yes when every validity question
                                     of the image was answered yes (only images whose questions
                                     were all answered)
RUN/human/questions/<annotator>.csv  annotator,sample_id,question,answer: each validity answer
RUN/human/audit.json                 provenance: the study's config, seed, version, and per
                                     annotator the items answered and open (`complete`: none open)

A study with open items is refused unless `partial` (`audit collect --partial`): collecting
while annotators are still at work would give a report computed on part of the study; with
--partial it is collected, and the report states on every human table who answered how much.
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
from autocomp.store.atomic import sweep_stale, write_json, write_text
from autocomp.store.outputs import check_output
from autocomp.store.paths import check_apart
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


def progress_line(name: str, p: dict[str, Any]) -> str:
    """ "V4: 5 of 36 answered (choice 5 of 24, validity 0 of 12), 31 open" """
    blocks = f"choice {p['choice_answered']:,} of {p['choice_items']:,}, validity " + (
        f"{p['valid_answered']:,} of {p['valid_items']:,}"
    )
    state = "complete" if p["complete"] else f"{p['open']:,} open"
    return f"{name}: {p['answered']:,} of {p['items']:,} answered ({blocks}), {state}"


def collect_stage(study_dir: str | Path, out: str | Path, partial: bool = False) -> dict[str, Any]:
    """Write the CSVs into `out` (RUN/human/); return the progress per annotator. A study with
    open items is refused (nothing written) unless `partial`: then what is answered is collected
    and audit.json records the study as incomplete (the report says so on every human table)."""
    study = Study(study_dir)
    out = Path(out)
    check_apart(out, {"study_dir": study_dir})
    if out.exists() and not out.is_dir():
        raise UsageError("out", str(out), "is a file; give a folder (RUN/human/)")
    check_output(out)
    foreign = sorted(p.name for p in out.glob("*.csv") if p.stem not in study.annotators)
    if foreign:  # the report would count them as this study's annotators
        raise UsageError(
            "out", str(out), f"holds annotations of another study ({', '.join(foreign[:5])}); "
            "collect into a new folder, or remove them first",
        )  # fmt: skip
    summary = study.progress()
    waiting = [name for name, p in summary.items() if not p["complete"]]
    if waiting and not partial:
        said = "; ".join(
            f"{n} {summary[n]['answered']:,} of {summary[n]['items']:,}" for n in waiting
        )
        raise UsageError(
            "study_dir", str(study_dir), f"{len(waiting)} of {len(summary)} annotator(s) have "
            f"open items ({said} answered); wait until they finish, or collect what is answered "
            "with partial=True (--partial; the report then marks the study incomplete)",
        )  # fmt: skip
    (out / "questions").mkdir(parents=True, exist_ok=True)
    for folder in (out, out / "questions"):
        sweep_stale(folder)  # temporaries of a killed collect
    human, questions = collected_rows(study)
    for name in study.items:
        _write_csv(out / f"{name}.csv", ["annotator", "sample_id", "task", "answer"], human[name])
        _write_csv(
            out / "questions" / f"{name}.csv",
            ["annotator", "sample_id", "question", "answer"],
            questions[name],
        )
    manifest = study.manifest
    document = provenance(
        "human_annotations",
        config=manifest.get("config"),
        benchmark=manifest.get("benchmark"),
        study_made_by=manifest.get("autocomp_version"),
        answers=summary,
        complete=not waiting,
    )
    write_json(out / "audit.json", document)
    return summary
