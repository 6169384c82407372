"""Helpers of the harness golden tests: tiny images, a deterministic scorer with many ties, and
a model's scores of an imported folder as a run writes them (sample_id, candidate_index, score,
tokens)."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

Scorer = Callable[[str, str], float]


def png(seed: int, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (seed * 37 % 256, seed * 91 % 256, 200)).save(buffer, fmt)
    return buffer.getvalue()


def tied_scorer(seed: int, levels: int = 3) -> Scorer:
    """score(image name, text): one of `levels` values, fixed by a hash (ties are common)."""

    def score(image: str, text: str) -> float:
        digest = hashlib.sha256(f"{seed}|{image}|{text}".encode()).digest()
        return digest[0] % levels / levels

    return score


def imported_rows(folder: Path) -> list[dict]:
    parts = sorted((folder / "data").glob("*.parquet"))
    columns = ["sample_id", "image_ref", "texts", "true_texts", "subset", "group_id", "query"]
    return pa.concat_tables([pq.read_table(p, columns=columns) for p in parts]).to_pylist()


def run_scores(folder: Path, score: Scorer, key: Callable[[str], str] = lambda r: r) -> pa.Table:
    """The scores a run of `score` writes for the imported benchmark `folder`: each row's image
    (named by `key(image_ref)`) against each of its texts, in candidate order."""
    out = []
    for row in imported_rows(folder):
        for t, text in enumerate(row["texts"]):
            out.append(
                {
                    "sample_id": row["sample_id"],
                    "candidate_index": t,
                    "score": score(key(row["image_ref"]), text),
                    "tokens": None,
                }
            )
    return pa.Table.from_pylist(
        out,
        pa.schema(
            [
                ("sample_id", pa.string()),
                ("candidate_index", pa.int32()),
                ("score", pa.float64()),
                ("tokens", pa.int32()),
            ]
        ),
    )
