"""VLMEvalKit's predictions of an exported Auto-Comp dataset, read back into a score-run folder
(`autocomp import vlmevalkit-results`): predictions and a summary per family x N x condition x
set, the layout `autocomp score` writes (store/catalog/runs.py), so they join autocomp's own runs.

A reply is read as VLMEvalKit reads it under its exact-matching policy (no judge model):
`can_infer` of vlmeval/utils/matching_util.py (open-compass/VLMEvalKit at e8e78f0, lines 18-128),
transcribed below: the option letter the reply names, else the one option whose text it holds,
else none (wrong). On the circular dataset an item counts only when every rotation is answered
right (vlmeval/dataset/utils/multiple_choice.py, mcq_circular_eval and prefetch_circular_group,
lines 409-582); the row's `options` are the first rotation's.
"""

from __future__ import annotations

import copy
import re
import string
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp import __version__
from autocomp.errors import UsageError
from autocomp.exports.vlmevalkit import CIRCULAR
from autocomp.scoring.choice import options_text
from autocomp.store.atomic import write_json
from autocomp.store.catalog.runs import SCORE_FORMAT, ScoreRun
from autocomp.store.catalog.schemas import VLMEVALKIT_KEY_SCHEMA
from autocomp.store.tables import provenance

REJECTED = (
    "Sorry, I can't help with images of people yet.", "I can't process this file.",
    "I'm sorry, but without the image provided", "Cannot determine the answer",
)  # fmt: skip
_VERBOSE = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")
NEEDED = ("index", "prediction")


def can_infer_option(answer: str, choices: dict[str, str]) -> str | None:
    """VLMEvalKit's can_infer_option (without its VERBOSE logging)."""
    if "Failed to obtain answer via API" in answer:
        return None
    if any(err in answer for err in REJECTED):
        return "Z"
    mod = answer
    for c in ".()[],:;!*#{}":
        mod = mod.replace(c, " ")
    splits = [x.strip() for x in mod.split()]
    count = sum(1 for c in choices if c in splits)
    if count == 1:
        for ch in choices:
            if ch in splits and splits.index(ch) > len(splits) - 5:
                return ch
    elif count == 0 and sum(1 for c in ("Z", "") if c in splits) == 1:
        return "Z"
    match = _VERBOSE.search(answer or "")
    if match and match.group(1).upper() in choices:
        return match.group(1).upper()
    return None


def can_infer_text(answer: str, choices: dict[str, str]) -> str | None:
    """VLMEvalKit's can_infer_text: the one option whose text the reply holds."""
    answer = answer.lower()
    if len(answer) > 2 * sum(len(str(v)) for v in choices.values()):
        return None
    lowered = {k: str(v).lower() for k, v in copy.copy(choices).items()}
    found = [k for k, v in lowered.items() if v in answer]
    return found[0] if len(found) == 1 else None


def can_infer(answer: str, choices: dict[str, str]) -> str | None:
    """The letter VLMEvalKit reads from a reply (None: it reads none)."""
    answer = str(answer)
    return can_infer_option(answer, choices) or can_infer_text(answer, choices)


def read_predictions(path: Path) -> list[dict[str, Any]]:
    """The rows of a VLMEvalKit predictions file (.xlsx as its dump_xlsx writes, or .tsv)."""
    import pandas as pd  # type: ignore[import-untyped]

    if not path.is_file():
        raise UsageError(
            "predictions", str(path), "no such file; give VLMEvalKit's <model>_<dataset>.xlsx"
        )
    try:
        if path.suffix == ".xlsx":
            frame = pd.read_excel(path)
        elif path.suffix == ".tsv":
            frame = pd.read_csv(path, sep="\t")
        else:
            raise UsageError(
                "predictions", str(path), "is neither .xlsx nor .tsv (VLMEvalKit's PRED_FORMAT)"
            )
    except (ValueError, OSError) as exc:
        raise UsageError("predictions", str(path), f"is not readable ({exc})") from None
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise UsageError(
            "predictions", str(path), f"lacks the columns {', '.join(missing)} (a VLMEvalKit "
            f"predictions file has {', '.join(NEEDED)} and the options A, B, ...)",
        )  # fmt: skip
    return frame.to_dict("records")


def _choices(row: dict[str, Any], letters: str) -> dict[str, str]:
    """The options of a prediction row (VLMEvalKit's build_choices: the non-empty letters)."""
    out = {}
    for letter in letters:
        value = row.get(letter)
        if value is not None and value == value and str(value) != "":  # NaN != NaN
            out[letter] = str(value)
    return out


def _key(path: Path, dataset: str) -> dict[int, dict[str, Any]]:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise UsageError("key", str(path), f"is not readable ({exc})") from None
    if table.schema.remove_metadata() != VLMEVALKIT_KEY_SCHEMA:
        raise UsageError(
            "key", str(path), "is not an AutoComp_key.parquet of `autocomp export vlmevalkit`"
        )
    return {r["index"]: r for r in table.to_pylist() if r["dataset"] == dataset}


def predictions(
    rows: list[dict[str, Any]], key: dict[int, dict[str, Any]], model: str, circular: bool
) -> list[dict[str, Any]]:
    """One prediction row per question (per rotation group on the circular dataset)."""
    groups: dict[int, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for row in rows:
        index = int(row["index"])
        if index not in key:
            raise UsageError(
                "predictions",
                str(index),
                "is an index the export's key does not hold; give the key of the export "
                "VLMEvalKit ran",
            )
        groups.setdefault(key[index]["g_index"], []).append((row, key[index]))
    out = []
    for group in sorted(groups):
        members = sorted(groups[group], key=lambda m: m[1]["index"])
        hits, first_pick, reasons = [], -1, []
        for n, (row, k) in enumerate(members):
            letter = can_infer(row["prediction"], _choices(row, string.ascii_uppercase))
            hits.append(letter == k["answer"])
            pick = (
                k["candidates"][k["letters"].index(letter)]
                if letter and letter in k["letters"]
                else -1
            )
            if n == 0:
                first_pick = pick
            if letter is None:
                reasons.append(f"index {k['index']}: no option read from the reply")
        k0 = members[0][1]
        out.append({
            "model": model, "sample_id": k0["sample_id"], "family": k0["family"], "n": k0["n"],
            "condition": k0["condition"], "set": k0["set"], "protocol": "paper",
            "candidates": len(k0["candidates"]), "correct": all(hits), "tie": False,
            "predicted": first_pick, "positive_score": None, "best_negative_score": None,
            "failed": False, "reason": "; ".join(reasons), "truncated": False,
            "score_type": "vlmevalkit_circular" if circular else "vlmevalkit",
            "options": options_text(k0["candidates"]),
        })  # fmt: skip
    return out


def import_results(
    predictions_file: str | Path, key_file: str | Path, out: str | Path, model: str
) -> pa.Table:
    """<out>/<model>/ as a score-run folder (run.json, predictions, summary) from VLMEvalKit's
    predictions; the dataset (plain or circular) is read from the file name, as VLMEvalKit
    decides it. Returns the summary."""
    path = Path(predictions_file)
    circular = "circular" in path.name.lower()
    key = _key(Path(key_file), CIRCULAR if circular else "AutoComp")
    rows = predictions(read_predictions(path), key, model, circular)
    folder = Path(out) / model
    if folder.exists():
        raise UsageError("out", str(folder), "exists; choose a new folder")
    run = ScoreRun(folder, "out")
    source: dict[str, Any] = {
        "harness": "vlmevalkit", "predictions": str(path), "key": str(key_file),
        "circular": circular,
    }  # fmt: skip
    record = {
        "format": SCORE_FORMAT, "entry": {"name": model, "backend": "vlmevalkit"},
        "source": source, "autocomp_version": __version__,
    }  # fmt: skip
    run.start(record)
    document = provenance("scores", harness="vlmevalkit", circular=circular, source=source)
    run.write_part(0, [], rows, document)
    summary = run.write_summary(document)
    write_json(
        Path(out) / "import_report.json",
        {"model": model, "items": len(rows), **source},
        indent=2,
    )
    return summary
