"""Import MMVP-VLM: 135 pairs of CLIP-blind images x two statements, in 9 categories.

The release (huggingface.co/datasets/MMVP/MMVP_VLM) is a folder holding `Questions.csv` and
`MLLM_VLM Images/<type>/<qid>.jpg`. Its scorer, github.com/tsb0601/MMVP scripts/evaluate_vlm.py,
is followed to the letter:
- rows are read after the header as (qid, type, statement), two consecutive rows a pair (an odd
  last row is left out, as its `next(reader, None)` does);
- both images of a pair are under the first row's type folder: `<type1>/<qid1>.jpg`,
  `<type1>/<qid2>.jpg`; the texts are "a photo of " + statement;
- statement k is true for image 1 when its qid is odd, else image 2 (`gt = "img1" if qid % 2
  == 1 else "img2"`);
- the category of pair p (0-based, in file order) is CATEGORIES[p // 15].
The rule is `pair` (both statements pick their true image; the script's `img1 if prob > 0.5
else img2` gives a tie to the second image: tie policy `last`), averaged per category.
"""

from __future__ import annotations

import csv
from pathlib import Path

from autocomp.errors import UsageError
from autocomp.importers.harness import Group, Parsed

NAME = "mmvp-vlm"
QUESTIONS = "Questions.csv"
IMAGES = "MLLM_VLM Images"
PREFIX = "a photo of "
PAIRS_PER_CATEGORY = 15
CATEGORIES = (
    "Orientation and Direction", "Presence of Specific Features", "State and Condition",
    "Quantity and Count", "Positional and Relational Context", "Color and Appearance",
    "Structural Characteristics", "Texts", "Viewpoint and Perspective",
)  # fmt: skip
EXPECTS = (
    f"give the MMVP_VLM folder: {QUESTIONS} (qid, type, statement per row, two rows a pair) and "
    f"'{IMAGES}/<type>/<qid>.jpg'"
)


def _rows(file: Path) -> list[list[str]]:
    try:
        with file.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError("source", str(file), f"cannot be read as CSV ({exc}); {EXPECTS}") from None
    return rows[1:]  # the header


def _row(row: list[str], number: int, file: Path) -> tuple[int, str, str]:
    where = f"{file.name} row {number}"
    if len(row) != 3:
        raise UsageError(
            "source", where, f"has {len(row)} columns, not 3 (qid, type, statement): not "
            f"MMVP-VLM's {QUESTIONS}; {EXPECTS}"
        )  # fmt: skip
    qid, kind, statement = row
    if not qid.strip().lstrip("-").isdigit():
        raise UsageError("source", where, f"qid {qid!r} is not a whole number; {EXPECTS}")
    if not statement.strip() or not kind.strip():
        raise UsageError("source", where, "type and statement must be non-empty")
    return int(qid), kind, statement


def parse(source: Path) -> Parsed:
    """The pairs of an MMVP_VLM folder as groups."""
    file = source / QUESTIONS if source.is_dir() else source
    if not file.is_file():
        raise UsageError("source", str(source), f"holds no {QUESTIONS}; {EXPECTS}")
    rows = [_row(r, i, file) for i, r in enumerate(_rows(file), 2)]
    groups = []
    for p in range(len(rows) // 2):
        (qid1, kind, statement1), (qid2, _, statement2) = rows[2 * p], rows[2 * p + 1]
        truth_image = [0 if qid % 2 == 1 else 1 for qid in (qid1, qid2)]  # per statement
        truth = tuple(tuple(t for t in (0, 1) if truth_image[t] == i) for i in (0, 1))
        category = CATEGORIES[p // PAIRS_PER_CATEGORY] if p // PAIRS_PER_CATEGORY < 9 else ""
        if not category:
            raise UsageError(
                "source", str(file), f"holds {len(rows) // 2} pairs; MMVP-VLM has 9 categories "
                f"of {PAIRS_PER_CATEGORY} (135 pairs); {EXPECTS}"
            )  # fmt: skip
        groups.append(Group(
            subset=category, group_id=f"{qid1}-{qid2}",
            images=(f"{kind}/{qid1}.jpg", f"{kind}/{qid2}.jpg"),
            texts=(PREFIX + statement1, PREFIX + statement2), truth=truth, query="text",
            meta={"qid1": qid1, "qid2": qid2, "type": kind},
        ))  # fmt: skip
    if not groups:
        raise UsageError("source", str(file), f"holds no pair of rows; {EXPECTS}")
    root = (source if source.is_dir() else source.parent) / IMAGES
    return Parsed(groups, [file.name], root=root)
