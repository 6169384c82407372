"""Helpers of the harness golden tests: tiny images, a deterministic scorer with many ties, and
a model's scores of an imported folder as a run writes them (sample_id, candidate_index, score,
tokens)."""

from __future__ import annotations

import hashlib
import io
import json
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


def write_winoground(root: Path, groups: int = 12) -> tuple[Path, Path]:
    """facebook/winoground's layout under `root`: (data folder with examples.jsonl, images/)."""
    data = root / "winoground" / "data"
    images = data / "images"
    images.mkdir(parents=True)
    lines = []
    tags = ["Object", "Relation", "Both"]
    for i in range(groups):
        for k in (0, 1):
            (images / f"ex_{i}_img_{k}.png").write_bytes(png(2 * i + k))
        lines.append(json.dumps({
            "id": i, "image_0": f"ex_{i}_img_0", "image_1": f"ex_{i}_img_1",
            "caption_0": f"a mug in some grass {i}", "caption_1": f"some grass in a mug {i}",
            "tag": "Object", "secondary_tag": "", "num_main_preds": 1,
            "collapsed_tag": tags[i % 3],
        }))  # fmt: skip
    (data / "examples.jsonl").write_text("\n".join(lines) + "\n")
    return data, images


SIZES = ["small", "medium", "large"]


def write_spec(root: Path, subsets: tuple[str, ...] = ("absolute_size", "count")) -> Path:
    """SPEC's layout under `root`/SPEC: per subset image2text.json, text2image.json, images/;
    4 groups of 3 images x 3 texts, and one lone text-to-image item per subset."""
    root = root / "SPEC"
    n = 0
    for subset in subsets:
        folder = root / subset
        (folder / "images").mkdir(parents=True)
        i2t, t2i = [], []
        for g in range(4):
            images = [f"images/{g}_{s}.jpg" for s in SIZES]
            texts = [f"a {s} cat {g}" for s in SIZES]
            for k, image in enumerate(images):
                (folder / image).write_bytes(png(n, "JPEG"))
                n += 1
                i2t.append({"query": image, "keys": texts, "label": k})
                t2i.append({"query": texts[k], "keys": images, "label": k})
        t2i.append(
            {"query": "a lone cat", "keys": [f"images/0_{s}.jpg" for s in SIZES[:2]], "label": 1}
        )  # a candidate list no other item has: a one-text group
        (folder / "image2text.json").write_text(json.dumps(i2t))
        (folder / "text2image.json").write_text(json.dumps(t2i))
    return root
