"""SugarCrepe++ (Dumpala et al., NeurIPS 2024 D&B): two positive captions and one negative per
COCO image, scored as the authors do (github.com/Sri-Harsha/scpp @ c083bbf).

Release layout (`data/`, read by `VLMs/test_*.py`, e.g. test_Variants_CLIP.py:36-58): one JSON
file per subset (`replace_att.json`, `replace_obj.json`, `replace_rel.json`, `swap_att.json`,
`swap_obj.json`), each a JSON list of {id, filename, caption, caption2, negative_caption}; the
COCO val2017 images under --images (`img_path`, line 10).

Scoring (test_Variants_CLIP.py:71-99), strict `>` everywhere (a tie counts as wrong):
    ITT     cos(image, P1) > cos(image, Neg) and cos(image, P2) > cos(image, Neg)
    P1-Neg  cos(image, P1) > cos(image, Neg)
    P2-Neg  cos(image, P2) > cos(image, Neg)
    TOT     cos(P1, P2) > cos(P1, Neg) and cos(P1, P2) > cos(P2, Neg): the text encoder alone
Accuracy per subset file (the share of its items). Texts are scored in the order [P1, P2, Neg].
ITT and the P-Neg scores come from any backend's scores of the image against the three texts
(`sugarcrepe-pp`). TOT (`sugarcrepe-pp-tot`) needs text-text similarity: its rows carry a
query text (P1, then P2) scored against the three texts by the backend's text embedding, which
only open_clip has; any other backend is refused with one line before it loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.importers.harness import Group, Parsed
from autocomp.importers.sources import read_json

KEYS = ("id", "filename", "caption", "caption2", "negative_caption")
SUBSETS = ("replace_att", "replace_obj", "replace_rel", "swap_att", "swap_obj")
EXPECTS = (
    "give SugarCrepe++'s data/ folder (replace_att.json, replace_obj.json, replace_rel.json, "
    "swap_att.json, swap_obj.json: lists of id, filename, caption, caption2, negative_caption) "
    "or one of its files"
)


def texts(item: dict[str, Any]) -> list[str]:
    """The item's texts in scoring order: [P1, P2, Neg]."""
    return [item["caption"], item["caption2"], item["negative_caption"]]


def check_items(data: Any, where: str) -> list[dict[str, Any]]:
    """A subset file's items, each with the five keys its scripts read (string texts)."""
    if not isinstance(data, list) or not data:
        raise UsageError(
            "source", where, f"must be a non-empty JSON list of items with {', '.join(KEYS)} "
            "(SugarCrepe++'s data/<subset>.json)"
        )  # fmt: skip
    for number, item in enumerate(data):
        missing = [k for k in KEYS if not isinstance(item, dict) or k not in item]
        if missing:
            hint = (
                " (SugarCrepe's file? it has no caption2)"
                if isinstance(item, dict) and "caption2" not in item
                else ""
            )
            raise UsageError(
                "source", f"{where} item {number}",
                f"lacks {', '.join(missing)}; a SugarCrepe++ item has {', '.join(KEYS)}{hint}",
            )  # fmt: skip
        bad = [k for k in KEYS[1:] if not isinstance(item[k], str)]
        if bad:
            raise UsageError("source", f"{where} item {number}", f"has non-text {', '.join(bad)}")
    return data


def _files(source: Path) -> list[Path]:
    if source.is_dir():
        files = sorted(p for p in source.glob("*.json") if not p.name.startswith("."))
        if not files:
            raise UsageError(
                "source", str(source), "holds no .json files; give SugarCrepe++'s data/ folder "
                f"({', '.join(s + '.json' for s in SUBSETS)}) or one of them"
            )  # fmt: skip
        return files
    if not source.is_file():
        raise UsageError("source", str(source), "no such file or folder")
    return [source]


def parse(source: Path) -> Parsed:
    """Every item of every subset file as a group: one COCO image x [P1, P2, Neg], P1 and P2
    true; the subset is the file's name."""
    groups, names = [], []
    for file in _files(source):
        items = check_items(read_json(file), file.name)
        names.append(file.name)
        for item in items:
            groups.append(Group(
                subset=file.stem, group_id=str(item["id"]), images=(item["filename"],),
                texts=tuple(texts(item)), truth=((0, 1),), query="image",
                meta={"id": item["id"]} if isinstance(item["id"], str | int) else {},
            ))  # fmt: skip
    return Parsed(groups, names)


def parse_text_only(source: Path) -> Parsed:
    """TOT: every item as a group of two text-only rows, P1 and P2 each scored against
    [P1, P2, Neg] by text-text similarity (the item's image is kept but not scored)."""
    parsed = parse(source)
    groups = [
        Group(
            subset=g.subset,
            group_id=g.group_id,
            images=g.images * 2,
            texts=g.texts,
            truth=((1,), (0,)),
            query="text",
            meta=g.meta,
            query_texts=g.texts[:2],
        )
        for g in parsed.groups
    ]
    return Parsed(groups, parsed.files)
