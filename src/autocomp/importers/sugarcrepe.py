"""Import SugarCrepe: COCO images, a positive caption and one hard negative per item.

The source is one SugarCrepe JSON file or a folder of them, one per category (replace_obj.json,
replace_att.json, replace_rel.json, swap_obj.json, swap_att.json, add_obj.json, add_att.json),
each a JSON object: id -> {"filename": COCO file name, "caption": positive, "negative_caption":
negative}. The images are the COCO val2017 files under --images; they are embedded, so the
folder is self-contained (a missing file stops the import, naming it, unless --skip-missing
drops and counts its items).

Each item becomes one benchmark row scored as a 1-negative set:
    family      "sugarcrepe-<category>" (the file name without .json)
    n           0: SugarCrepe's captions have no fixed object count, and 0 keeps its rows apart
                from every Auto-Comp N (N=1 is the sanity split, whose Swap/Confusion are empty)
    condition   "contextual": a natural caption of a real scene (there is no Minimal pair;
                `paired` is false)
    caption     the positive; swap_negatives = confusion_negatives = [negative],
                swap_in_confusion = [0], the same-scene flags false, the arrangements [-1] (no
                Auto-Comp arrangement), the vary_* sets empty; chance 1/2.
An item whose negative equals its positive cannot be won under the tie rule; an item with an
empty caption or negative states nothing; an item whose id repeats an earlier one in its file
(JSON keeps only the last silently; here the first is kept) is a duplicate: each is dropped and
counted by reason in import_report.json. Every image is decoded in full before its item is
accepted: one that does not decode stops the import naming it, or with --skip-missing is
dropped and counted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers import output
from autocomp.progress import row_progress
from autocomp.store.catalog.ids import sample_id
from autocomp.store.catalog.schemas import SUGARCREPE_SCHEMA
from autocomp.store.tables import provenance

FORMAT = "sugarcrepe"
KEYS = ("filename", "caption", "negative_caption")
CATEGORY = re.compile(r"[A-Za-z0-9_]+")
BATCH_ROWS = 64
ABOUT = (
    "Imported by autocomp from SugarCrepe (COCO val2017 images, one positive caption and one "
    "hard negative per item), scored as a 1-negative set: family sugarcrepe-<category>, N = 0."
)


def source_files(source: Path) -> list[Path]:
    """The category files of a source (one .json file, or the .json files of a folder)."""
    if not source.exists():
        raise UsageError("source", str(source), "no such file or folder")
    files = sorted(source.glob("*.json")) if source.is_dir() else [source]
    if not files:
        raise UsageError("source", str(source), "holds no .json files; give SugarCrepe's")
    for file in files:
        if not CATEGORY.fullmatch(file.stem):
            raise UsageError(
                "source", str(file), "the category (file name) may hold letters, digits and _"
            )
    return files


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object that keeps every repeated key: the repeats go under DUPLICATES (json's
    own rule keeps the last one silently)."""
    out: dict[str, Any] = {}
    repeats: list[tuple[str, Any]] = []
    for key, value in pairs:
        if key in out:
            repeats.append((key, value))
        else:
            out[key] = value
    if repeats:
        out[DUPLICATES] = repeats
    return out


DUPLICATES = "\0duplicates"  # no JSON key read from a file can be this


def read_items(file: Path) -> tuple[dict[str, dict[str, str]], int]:
    """One category file, checked: an object of items with the three string fields; and how
    many items repeat an earlier item's id (dropped, counted: the first one is kept)."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"), object_pairs_hook=_pairs)
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError("source", str(file), f"is not valid JSON ({exc})") from None
    except RecursionError:
        raise UsageError(
            "source", str(file), "is JSON nested too deeply to read; give SugarCrepe's file"
        ) from None
    if not isinstance(data, dict) or not data:
        raise UsageError(
            "source", str(file), "must be a non-empty JSON object: id -> {filename, caption, "
            "negative_caption}",
        )  # fmt: skip
    repeats = data.pop(DUPLICATES, [])
    for key, item in [*data.items(), *repeats]:
        if isinstance(item, dict):
            item.pop(DUPLICATES, None)  # a repeated field inside an item: the first one counts
        missing = [
            k for k in KEYS if not isinstance(item, dict) or not isinstance(item.get(k), str)
        ]
        if missing:
            raise UsageError(
                "source", f"{file.name} item {key}", f"needs string field(s) {', '.join(missing)}"
            )
    return data, len(repeats)


def row(category: str, key: str, item: dict[str, str], protocol: str) -> dict[str, Any]:
    """The benchmark row of one item (without its image)."""
    negative = item["negative_caption"]
    return {
        # each item is its own concept (the unit the report's intervals resample): the sample id
        # is <concept_id>/<condition> as for every benchmark (store/catalog/ids.py)
        "concept_id": f"sugarcrepe-{category}-{key}",
        "sample_id": sample_id(f"sugarcrepe-{category}-{key}", "contextual"),
        "family": f"sugarcrepe-{category}", "n": 0,
        "condition": "contextual", "paired": False, "category": category, "item_id": str(key),
        "filename": item["filename"], "negative_caption": negative, "caption": item["caption"],
        "caption_rewritten": False, "protocol": protocol,
        "swap_negatives": [negative], "swap_arrangements": [-1], "swap_same_scene": [False],
        "swap_in_confusion": [0], "confusion_negatives": [negative],
        "confusion_arrangements": [-1], "confusion_same_scene": [False],
        "vary_attribute_negatives": [], "vary_object_negatives": [],
        "swap_chance": 0.5, "confusion_chance": 0.5,
        "vary_attribute_chance": None, "vary_object_chance": None,
    }  # fmt: skip


def _rows(
    files: list[Path], root: Path, config: ImportConfig, dropped: Counter
) -> list[dict[str, Any]]:
    """The rows of every item that can be imported (its image decoded in full), in order."""
    rows, paths = [], []
    for file in files:
        category = file.stem
        items, repeats = read_items(file)
        if repeats:
            dropped[f"{category}: duplicate id (an earlier item has it)"] += repeats
        for key, item in items.items():
            if not item["caption"].strip():
                dropped[f"{category}: empty caption"] += 1
                continue
            if not item["negative_caption"].strip():
                dropped[f"{category}: empty negative caption"] += 1
                continue
            if item["negative_caption"].strip() == item["caption"].strip():
                dropped[f"{category}: negative equals the positive"] += 1
                continue
            path = output.locate(root, item["filename"])
            if path is None:
                where = f"{file.name} item {key}"
                _skip(config, dropped, category, "is missing", where, root / item["filename"])
                continue
            rows.append(row(category, key, item, config.protocol))
            paths.append(path)
    kept = []
    for start in range(0, len(rows), BATCH_ROWS):
        chunk = list(zip(rows[start : start + BATCH_ROWS], paths[start : start + BATCH_ROWS]))
        problems = output.image_problems([path.read_bytes() for _, path in chunk])
        for (r, path), problem in zip(chunk, problems):
            if problem is None:
                kept.append(r)
            else:
                where = f"{r['category']}.json item {r['item_id']}"
                _skip(config, dropped, r["category"], f"does not decode ({problem})", where, path)
    return kept


def _skip(
    config: ImportConfig, dropped: Counter, category: str, what: str, where: str, path: Path
) -> None:
    """An item whose image cannot be used: stop naming it, or (skip_missing) count it."""
    if not config.skip_missing:
        raise UsageError(
            "images", str(path), f"{what} ({where}); give the COCO val2017 folder, or pass "
            "--skip-missing to drop and count such items",
        )  # fmt: skip
    reason = "image missing" if what == "is missing" else "image does not decode"
    dropped[f"{category}: {reason}"] += 1


def _tables(rows: list[dict[str, Any]], root: Path) -> Iterator[pa.Table]:
    for start in range(0, len(rows), BATCH_ROWS):
        chunk = rows[start : start + BATCH_ROWS]
        images = [
            {"bytes": output.read_image(root, r["filename"]), "path": r["filename"]} for r in chunk
        ]
        table = pa.Table.from_pylist(chunk, SUGARCREPE_SCHEMA)
        yield table.append_column("image", output.image_column(images))


def import_sugarcrepe(
    source: str | Path,
    out: str | Path,
    images: str | Path | None = None,
    config: ImportConfig = ImportConfig(),
) -> dict[str, Any]:
    """`autocomp import sugarcrepe`: write the benchmark folder; return the report."""
    out = output.check_out(out, config.force)
    files = source_files(Path(source))
    if images is None or not Path(images).is_dir():
        raise UsageError("images", images, "give the COCO val2017 folder SugarCrepe's items name")
    root = Path(images)
    dropped: Counter = Counter()
    rows = _rows(files, root, config, dropped)
    if not rows:
        raise UsageError("source", str(source), f"no item could be imported ({dict(dropped)})")
    per_category = Counter(r["category"] for r in rows)
    report = {
        "format": FORMAT, "source": str(source), "files": [f.name for f in files],
        "items": sum(per_category.values()) + sum(dropped.values()), "samples": len(rows),
        "samples_by_category": dict(sorted(per_category.items())),
        "samples_dropped": dict(dropped.most_common()),
    }  # fmt: skip
    document = provenance(
        "benchmark", imported=FORMAT, source=Path(source).name, protocol=config.protocol,
        report={k: report[k] for k in ("items", "samples", "samples_by_category")},
    )  # fmt: skip
    keys = pa.Table.from_pylist(
        [{"family": r["family"], "n": r["n"], "condition": r["condition"]} for r in rows]
    )
    with output.building(out, config.force) as folder:
        with row_progress("import: images", len(rows)) as advance:
            output.write_parts(_tables(rows, root), folder, len(rows), document, advance)
        output.finish(folder, out.name, keys, document, ABOUT, report)
    return report
