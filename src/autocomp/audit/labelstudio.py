"""The human study in Label Studio: a study folder exported as Label Studio projects, and the
annotations Label Studio exports read back into the study's answer journals, so `audit
collect` and the report take them as if answered in `audit serve`.

Export (`export_labelstudio`): OUT/labeling_config.xml, the labeling interface (the item's
question as a header, its image, one single-choice answer whose options come from the task:
Label Studio's dynamic `Choices value="$options"`, labelstud.io/tags/choices), and
OUT/<annotator>/tasks.json, one Label Studio project per annotator (each annotator sees the
study's items in their own order with their own option order, which one shared project cannot
give): a JSON list of tasks {"data": {image, prompt, options: [{value, alias}], study,
annotator, item}}. The image is embedded as a `data:image/png;base64,` URL, so the projects need
no file server; `alias` is the option's index, which Label Studio writes in the result instead
of the text. Every string reaches Label Studio as JSON (json.dumps escapes it); the config holds
no study data.

Import (`import_labelstudio`): the JSON export of those projects (one file or a folder of
them): tasks with `data` as exported and `annotations`, each with `result` regions
{from_name: "answer", type: "choices", value: {choices: [alias or text]}}. Per task the last
annotation not cancelled counts (Label Studio lists them in creation order); its answer is
appended to the annotator's journal (Study.answer: the last answer wins there too). A task of
another study (its `study` id, or an item whose question differs), an unknown annotator or
item, or a choice that is no option of the item is refused naming it, before anything is
written.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from autocomp.audit.study import Study
from autocomp.errors import UsageError
from autocomp.store.atomic import atomic_folder, write_json, write_text
from autocomp.store.outputs import check_output
from autocomp.store.paths import check_apart

CONFIG_FILE = "labeling_config.xml"
TASKS_FILE = "tasks.json"
CHOICES = "answer"  # the Choices tag's name: what a result's from_name says
CONFIG = """<View>
  <Header value="$prompt"/>
  <Image name="image" value="$image"/>
  <Choices name="answer" toName="image" choice="single-radio" required="true" value="$options"/>
</View>
"""


def study_id(study: Study) -> str:
    """The study's id in every task: its progress credential's first half (derived from the
    annotators' tokens, never one of them)."""
    return study.progress_token()[:16]


def tasks(study: Study, annotator: str) -> list[dict[str, Any]]:
    """The Label Studio tasks of one annotator, in their item order."""
    out = []
    for position, item in enumerate(study.items[annotator]):
        data = study.image(annotator, position).read_bytes()
        out.append({"data": {
            "image": "data:image/png;base64," + base64.b64encode(data).decode("ascii"),
            "prompt": item["prompt"],
            "options": [{"value": o, "alias": str(k)} for k, o in enumerate(item["options"])],
            "study": study_id(study), "annotator": annotator, "item": position,
        }})  # fmt: skip
    return out


def export_labelstudio(study_dir: str | Path, out: str | Path, force: bool = False) -> dict:
    """Write the Label Studio projects of a study into `out` (a new folder; replaced only with
    `force`); return the tasks per annotator."""
    study = Study(study_dir)
    out = Path(out)
    check_apart(out, {"study_dir": study_dir})
    check_output(out)
    if out.exists() and not force:
        raise UsageError("out", str(out), "exists; choose a new folder, or pass --force")
    counts = {}
    with atomic_folder(out, replace=force) as folder:
        write_text(folder / CONFIG_FILE, CONFIG)
        for annotator in study.items:
            (folder / annotator).mkdir()
            written = tasks(study, annotator)
            write_json(folder / annotator / TASKS_FILE, written)
            counts[annotator] = len(written)
    return counts


def _exports(source: Path) -> list[Path]:
    if source.is_dir():
        files = sorted(p for p in source.rglob("*.json") if not p.name.startswith("."))
        if not files:
            raise UsageError("source", str(source), "holds no .json Label Studio exports")
        return files
    if not source.is_file():
        raise UsageError("source", str(source), "no such file or folder")
    return [source]


def _choice(task: dict[str, Any], item: dict[str, Any], where: str) -> int | None:
    """The option index the task's last kept annotation chose (None: no answer)."""
    kept = [
        a for a in task.get("annotations") or []
        if isinstance(a, dict) and not a.get("was_cancelled")
    ]  # fmt: skip
    if not kept:
        return None
    regions = [
        r for r in kept[-1].get("result") or []
        if isinstance(r, dict) and r.get("from_name") == CHOICES
    ]  # fmt: skip
    chosen = [c for r in regions for c in (r.get("value") or {}).get("choices") or []]
    if not chosen:
        return None
    said = str(chosen[-1])
    options = item["options"]
    if said.isdigit() and int(said) < len(options):
        return int(said)
    matches = [k for k, o in enumerate(options) if o == said]
    if len(matches) != 1:
        raise UsageError(
            "source", where, f"chose {said[:60]!r}, which is not one option of the item"
        )
    return matches[0]


def _answers(study: Study, file: Path) -> list[tuple[str, int, int]]:
    """(annotator, item, option) of every answered task of one export file, checked."""
    try:
        exported = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UsageError(
            "source", str(file), f"is not a Label Studio JSON export ({exc})"
        ) from None
    if not isinstance(exported, list):
        raise UsageError("source", str(file), "is not a Label Studio JSON export (a task list)")
    out = []
    for number, task in enumerate(exported):
        where = f"{file.name} task {number}"
        data = task.get("data") if isinstance(task, dict) else None
        if not isinstance(data, dict) or data.get("study") != study_id(study):
            raise UsageError(
                "source", where, "is not a task of this study (export the projects with "
                "`autocomp audit labelstudio-export` of this study folder)"
            )  # fmt: skip
        annotator, position = data.get("annotator"), data.get("item")
        items = study.items.get(str(annotator))
        if items is None or not isinstance(position, int) or not 0 <= position < len(items):
            raise UsageError(
                "source", where, f"names no item of this study ({annotator}, {position})"
            )
        item = items[position]
        if data.get("prompt") != item["prompt"]:
            raise UsageError("source", where, "asks another question than the study's item")
        choice = _choice(task, item, where)
        if choice is not None:
            out.append((str(annotator), position, choice))
    return out


def import_labelstudio(study_dir: str | Path, source: str | Path) -> dict[str, int]:
    """Append the answers of Label Studio's JSON export(s) at `source` to the study's journals;
    return the answers read per annotator."""
    study = Study(study_dir)
    answers = [a for file in _exports(Path(source)) for a in _answers(study, file)]
    counts: dict[str, int] = {name: 0 for name in study.items}
    for annotator, position, choice in answers:  # every file checked before any is written
        study.answer(annotator, position, choice)
        counts[annotator] += 1
    return counts
