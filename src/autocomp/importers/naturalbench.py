"""NaturalBench (Li et al., NeurIPS 2024 D&B): a VQA benchmark of two images x two questions
whose answers differ, scored as the authors do (github.com/Baiqi-Li/NaturalBench @ 9967605).

Release layout: the Hugging Face dataset `BaiqiL/NaturalBench` (`data/train-*.parquet`, read by
`load_dataset` in naturalbench_vqa.py:152), one row per group: `Index`, `Image_0`, `Image_1`
(images), `Question_0`, `Question_1`, the gold answers `Image_0_Question_0`,
`Image_1_Question_0`, `Image_0_Question_1`, `Image_1_Question_1`, `Question_Type` (`yes_no` or
`multiple_choice`; the dataset card spells it `Question Type`: either is read) and `Source`.

Each group becomes four rows in the script's order (lines 157-161): q0 on i0, q0 on i1, q1 on i0,
q1 on i1, each asking its question with the script's suffix (SUFFIX, lines 4-7) as the prompt.

How a backend answers: NaturalBench asks a question, so it needs a backend that follows a
per-request instruction (`ScoringBackend.prompts`: the transformers VLMs). Such a backend scores
the two answer options ("Yes" / "No", or "A" / "B") as the reply to the image and the prompt
(summed log-likelihood, as autocomp's VQA judge answers) and answers the option scoring higher;
equal scores answer neither (-1, what `extract_answer` returns when it finds no answer, lines
42-44). A contrastive backend (open_clip) has no instruction to follow: it is refused with one
line. The script reads generated text and extracts the first of yes/no; autocomp's answer is the
constrained one (the same as the script's whenever the model's reply starts with the option it
finds more likely).

Scoring (`get_scores`, lines 50-148): per group, from the four answers, Acc (each answer right:
4 units), Q-Acc (each question answers its two images differently and rightly: 2 units), I-Acc
(each image answers the two questions rightly: 2 units), G-Acc (all four right: 1 unit). The
script never reads the gold answers: it assumes the release's layout (q0 on i0 and q1 on i1 are
answered yes / A, the other two no / B). autocomp compares with the gold answers, which is the
same on every group laid out so; groups that are not are counted in the import report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.importers.harness import Group, Parsed, text_of
from autocomp.scoring.group_rules import CELLS  # (question, image) of each row of a group

SUFFIX = {
    "yes_no": "Please answer Yes or No.",
    "multiple_choice": "Please output the letter corresponding to the correct option.",
}
OPTIONS = {"yes_no": ("Yes", "No"), "multiple_choice": ("A", "B")}
TYPE_COLUMNS = ("Question_Type", "Question Type")
COLUMNS = (
    "Index", "Image_0", "Image_1", "Question_0", "Question_1", "Image_0_Question_0",
    "Image_1_Question_0", "Image_0_Question_1", "Image_1_Question_1",
)  # fmt: skip
LAYOUT = {(0, 0): 0, (0, 1): 1, (1, 0): 1, (1, 1): 0}  # the option get_scores expects: 0 = yes/A


def type_column(columns: list[str]) -> str:
    """The question-type column of a release (either spelling); UsageError naming every
    expected column when the file is not NaturalBench's."""
    missing = [c for c in COLUMNS if c not in columns]
    found = [c for c in TYPE_COLUMNS if c in columns]
    if missing or not found:
        expected = ", ".join([*COLUMNS, "Question_Type"])
        raise UsageError(
            "source", ", ".join(columns[:12]), f"is not NaturalBench's release: expected the "
            f"columns {expected} (BaiqiL/NaturalBench data/train-*.parquet)",
        )  # fmt: skip
    return found[0]


def prompt(question: str, kind: str) -> str:
    """The prompt of one row: the question with the script's suffix, joined as it joins them."""
    return question + SUFFIX[kind]


def gold_option(answer: Any, kind: str, where: str) -> int:
    """The option index (0: yes / A, 1: no / B) of a gold answer."""
    text = str(answer).strip()
    for index, option in enumerate(OPTIONS[kind]):
        if text.lower() == option.lower():
            return index
    raise UsageError(
        "source", where, f"has the answer {text[:40]!r}; a {kind} answer is "
        f"{' or '.join(OPTIONS[kind])}"
    )  # fmt: skip


EXPECTS = (
    "give BaiqiL/NaturalBench's data/ folder (train-*.parquet: "
    + ", ".join([*COLUMNS, "Question_Type", "Source"])
    + ")"
)


def _image(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, dict) and value.get("bytes"):
        return {"bytes": value["bytes"], "path": value.get("path") or where}
    if isinstance(value, dict):
        return {"bytes": None, "path": value.get("path") or where}
    raise UsageError("source", where, "an image column must hold embedded images ({bytes, path})")


def parse(source: Path) -> Parsed:
    """Every row of the release as a group of four rows, (question, image) in CELLS order, each
    asking its prompt with the two answer options as the texts."""
    from autocomp.importers.harness import records

    rows = records(source, COLUMNS, EXPECTS)
    kind_column = type_column(list(rows[0].keys()))
    groups = []
    for number, row in enumerate(rows):
        where = f"{source.name} row {number} (Index {row.get('Index')})"
        kind = str(row[kind_column])
        if kind not in OPTIONS:
            raise UsageError(
                "source", where, f"has the question type {kind!r}; expected {' or '.join(OPTIONS)}"
            )
        questions = [text_of(row, f"Question_{q}", where) for q in (0, 1)]
        gold = [gold_option(row[f"Image_{i}_Question_{q}"], kind, where) for q, i in CELLS]
        images = [_image(row[f"Image_{i}"], f"{where} Image_{i}") for _, i in CELLS]
        groups.append(Group(
            subset=str(row.get("Source") or kind), group_id=str(row["Index"]),
            images=tuple(images), texts=OPTIONS[kind], truth=tuple((g,) for g in gold),
            query="image", prompts=tuple(prompt(questions[q], kind) for q, _ in CELLS),
            meta={"question_type": kind, "questions": questions,
                  "official_layout": all(g == LAYOUT[c] for g, c in zip(gold, CELLS))},
        ))  # fmt: skip
    return Parsed(groups, [source.name])
