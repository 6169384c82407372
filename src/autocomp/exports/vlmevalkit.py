"""Auto-Comp as VLMEvalKit custom MCQ datasets, and its predictions read back.

From VLMEvalKit's source (open-compass/VLMEvalKit at e8e78f0):
- vlmeval/dataset/__init__.py, build_dataset (lines 399-429): a name it does not know is read
  from $LMUData/<name>.tsv; a table with `question`, `A`, `B` and `image` is a CustomMCQDataset
  (vlmeval/dataset/image_mcq.py, line 1367), loaded by vlmeval/smp/file.py `load` (pandas
  read_csv, sep="\\t").
- vlmeval/dataset/image_base.py (lines 146-181): `index` is the question's id; `image` is a
  base64 image, or (64 characters or fewer) the index of a row whose image it shares.
- image_mcq.py build_prompt (lines 212-247): options are the columns A..Z that are not empty;
  evaluate_heuristic (lines 255-330): a dataset whose name contains "circular" is scored by
  mcq_circular_eval (vlmeval/dataset/utils/multiple_choice.py, line 511): the copies of a
  question share `g_index` (the original's `index`) and the question counts only if every copy
  is right; report_acc groups by `category` and `l2-category`.
- smp/file.py: predictions are <model>_<dataset>.xlsx (dump_xlsx, pandas to_excel) or .tsv
  (PRED_FORMAT), the dataset's columns (image dropped) plus `prediction`.

Written per export: AutoComp.tsv (one row per question; category = family, l2-category = the
negative kind, i.e. the set), AutoComp_circular.tsv (every question once per rotation of its
options, rotation r at index r * 1e6 + i with g_index i and its image by reference), and
AutoComp_key.parquet (what `autocomp import vlmevalkit-results` needs: each index's item, set
and the candidate each letter shows). TSV cells are written by the csv module (quoted, every
tab and newline escaped), so a caption never breaks a row.
"""

from __future__ import annotations

import base64
import csv
import string
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.exports.questions import Question
from autocomp.store.catalog.schemas import VLMEVALKIT_KEY_SCHEMA

DATASET = "AutoComp"  # $LMUData/AutoComp.tsv: `--data AutoComp`
CIRCULAR = f"{DATASET}_circular"
KEY = f"{DATASET}_key.parquet"
LETTERS = string.ascii_uppercase  # build_prompt's option columns
ROTATION = 1_000_000  # circular copies: index = rotation * ROTATION + index (mcq_circular_eval)
QUESTION = "Which caption describes the image?"


def rotated(q: Question, r: int) -> tuple[list[str], list[int], int]:
    """Options, candidates and answer position after rotating the options by `r`."""
    k = len(q.options)
    order = [(i + r) % k for i in range(k)]
    return [q.options[i] for i in order], [q.candidates[i] for i in order], order.index(q.answer)


def _row(q: Question, index: int, image: str, options: list[str], answer: int) -> dict[str, Any]:
    row: dict[str, Any] = {"index": index, "image": image, "question": QUESTION}
    for letter in LETTERS:
        row[letter] = ""
    for letter, caption in zip(LETTERS, options):
        row[letter] = caption
    row.update({"answer": LETTERS[answer], "category": q.family, "l2-category": q.set_name})
    return row


def _write_tsv(path: Path, rows: list[dict[str, Any]], extra: tuple[str, ...] = ()) -> None:
    columns = ["index", *extra, "image", "question", *LETTERS, "answer", "category", "l2-category"]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns, delimiter="\t", quoting=csv.QUOTE_ALL)
        writer.writeheader()
        writer.writerows(rows)


def write(
    questions: list[Question], tmp: Path, final: Path, meta: dict[str, Any]
) -> dict[str, Any]:
    """The two TSVs and the key in `tmp`."""
    del final, meta  # the TSVs are found through $LMUData; the record is autocomp_export.json
    plain, circular, key = [], [], []
    for q in questions:
        image = base64.b64encode(q.image).decode("ascii")
        plain.append(_row(q, q.number, image, q.options, q.answer))
        key.append(_key(q, q.number, q.number, DATASET, q.candidates, q.answer))
        for r in range(len(q.options)):
            options, candidates, answer = rotated(q, r)
            index = r * ROTATION + q.number
            shared = image if r == 0 else str(q.number)  # a reference to the original's image
            circular.append({**_row(q, index, shared, options, answer), "g_index": q.number})
            key.append(_key(q, index, q.number, CIRCULAR, candidates, answer))
    _write_tsv(tmp / f"{DATASET}.tsv", plain)
    _write_tsv(tmp / f"{CIRCULAR}.tsv", circular, extra=("g_index",))
    pq.write_table(pa.Table.from_pylist(key, VLMEVALKIT_KEY_SCHEMA), tmp / KEY)
    return {
        "datasets": [DATASET, CIRCULAR],
        "questions": len(questions),
        "rows_circular": len(circular),
    }


def _key(
    q: Question, index: int, group: int, dataset: str, candidates: list[int], answer: int
) -> dict[str, Any]:
    return {
        "index": index, "g_index": group, "dataset": dataset, "sample_id": q.sample_id,
        "family": q.family, "n": q.n, "condition": q.condition, "set": q.set_name,
        "answer": LETTERS[answer], "letters": LETTERS[: len(candidates)], "candidates": candidates,
    }  # fmt: skip
