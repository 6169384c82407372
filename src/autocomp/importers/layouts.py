"""The layouts the Auto-Comp release reads and writes (github.com/iclrautocomp/AutoComp-Code),
each turned into one shape of rows: which column holds the labels, and per condition the caption
and image columns.

Hub repos (evaluation/evaluate_all_models.py lists 12, read by evaluation/hf_benchmarks.py with
`load_dataset(repo, split="train")`; a download is `data/train-*.parquet`):

    AutoComp-Paired-N{2,3}-{C,P}       objects, colors | relations, num_objects and both conditions:
                                       handmade_caption / handmade_image (Minimal) and
                                       llm_caption / llm_image (Contextual); hf_benchmarks also
                                       reads them as minimal_* / contextual_*, accepted alike
    AutoComp-Minimal-N{2,3}-{C,P}      one condition: caption / image; which one is the repo's
    AutoComp-Contextual-N{2,3}-{C,P}   name (the source path's "Minimal" / "Contextual" part) or
                                       ImportConfig.condition

The generation scripts' JSON (generation/generate_captions.py, kept by the filtering/ scripts):
a list of {id, task_type (color | position), num_objects, objects, attributes, handmade_caption,
llm_caption}; generation/generate_images.py writes the images to
`<output_dir>/handmade/concept_{id:05d}_handmade.webp` and `<output_dir>/llm/..._llm.webp`, so
one --images root (the output_dir) covers both conditions. `json_rows` turns the items into the
Paired shape (labels under colors / relations, image columns holding those file names).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.errors import UsageError, shorten
from autocomp.importers.sources import TableSource

FAMILIES = {"colors": "color", "relations": "position"}  # label column -> family
TASK_TYPES = {"color": "colors", "position": "relations"}  # the JSON's task_type -> label column
CONDITIONS = ("minimal", "contextual")
# per condition: the column prefixes that hold it (the release's own name first)
PREFIXES = {"minimal": ("handmade", "minimal"), "contextual": ("llm", "contextual")}
SINGLE = ("caption", "image")  # the Minimal-only and Contextual-only repos
JSON_IMAGE = "{kind}/concept_{id:05d}_{kind}.webp"  # generation/generate_images.py
HINT = (
    "give Auto-Comp release rows: objects, colors or relations, and handmade_caption / "
    "handmade_image, llm_caption / llm_image (Paired repos) or caption / image (Minimal-only and "
    "Contextual-only repos), or the generation scripts' JSON"
)
# the condition a release repo's name states: AutoComp-Minimal-N2-C, AutoComp-Contextual-N3-P
# (also inside a hub cache folder: datasets--AutoComp--AutoComp-Minimal-N2-C); a folder merely
# named "contextual-trials" says nothing about the repo inside it
_CONDITION_WORD = re.compile(r"(?<![a-z])autocomp-(minimal|contextual)(?![a-z])", re.IGNORECASE)


@dataclass(frozen=True)
class Layout:
    """How a source's rows hold their concepts: the labels column and, per condition imported,
    its (caption column, image column)."""

    name: str  # paired | single | json
    labels: str  # colors | relations
    conditions: dict[str, tuple[str, str]]

    @property
    def family(self) -> str:
        return FAMILIES[self.labels]

    @property
    def image_columns(self) -> list[str]:
        return [image for _, image in self.conditions.values()]

    @property
    def columns(self) -> list[str]:
        return ["objects", self.labels, *(c for pair in self.conditions.values() for c in pair)]


def condition_in_name(path: Path) -> str | None:
    """The condition a source's path names as a release repo's name ("AutoComp-Minimal-N2-C"
    -> minimal), innermost part first; None when no part is such a name, or one names both."""
    for part in reversed(path.resolve().parts):
        found = {m.lower() for m in _CONDITION_WORD.findall(part)}
        if len(found) == 1:
            return found.pop()
        if found:
            return None
    return None


def _labels_column(source: TableSource) -> str:
    found = [c for c in FAMILIES if c in source.schema.names]
    if len(found) != 1:
        what = "both colors and relations" if found else "neither colors nor relations"
        raise UsageError("source", str(source.path), f"has {what}; {HINT}")
    return found[0]


def layout_of(source: TableSource, condition: str = "") -> Layout:
    """The source's layout, checked: its label column, and the conditions it holds (`condition`:
    the one a caption / image source holds, "" = from the source's name)."""
    labels, names = _labels_column(source), set(source.schema.names)
    paired: dict[str, tuple[str, str]] = {}
    for cond, prefixes in PREFIXES.items():
        for prefix in prefixes:
            pair = (f"{prefix}_caption", f"{prefix}_image")
            if pair[0] in names or pair[1] in names:
                present = [c for c in pair if c in names]
                if len(present) == 1:
                    other = pair[1] if present[0] == pair[0] else pair[0]
                    raise UsageError(
                        "source", str(source.path), f"has {present[0]} without {other}; {HINT}"
                    )
                if cond in paired:  # handmade_* and minimal_*: two sets of one condition
                    raise UsageError(
                        "source", str(source.path), f"has both {paired[cond][0]} and {pair[0]} "
                        f"(two {cond} sets); keep one pair of columns per condition"
                    )  # fmt: skip
                paired[cond] = pair
    if paired:
        if condition and condition not in paired:
            held = " and ".join(paired)
            raise UsageError("condition", condition, f"the source holds {held} only")
        kept = {c: p for c, p in paired.items() if not condition or c == condition}
        return Layout("json" if source.kind == "json" else "paired", labels, kept)
    if not set(SINGLE) <= names:
        source.require(["handmade_caption", "handmade_image"], HINT)
    named = condition_in_name(source.path)
    if condition and named and condition != named:
        raise UsageError(
            "condition", condition, f"the source's name says {named} ({source.path}); give "
            "the matching one"
        )  # fmt: skip
    chosen = condition or named
    if not chosen:
        raise UsageError(
            "source", str(source.path), "holds one condition (caption / image columns) and its "
            "name does not say which; pass --condition minimal or --condition contextual"
        )  # fmt: skip
    return Layout("single", labels, {chosen: SINGLE})


# ----------------------------------------------------------------------------- JSON


def _strings(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


INT64_MAX = 2**63 - 1  # the id and num_objects columns are int64


def _whole(value: Any) -> int | None:
    """A JSON value as a whole number 0 to INT64_MAX (what an int64 column holds), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= INT64_MAX:
        return None
    return value


def _item_id(file: Path, index: int, item: dict[str, Any]) -> int:
    value = _whole(item.get("id"))
    if value is None:
        raise UsageError(
            "source", f"{file} item {index}", f"id {shorten(repr(item.get('id')), 40)} is not a "
            "whole number from 0 to 2^63-1 (its image files are named from it: "
            "concept_{id:05d}_handmade.webp)"
        )  # fmt: skip
    return value


def json_rows(file: Path, data: Any) -> pa.Table:
    """The generation scripts' JSON items as rows of the Paired shape (see the module doc). The
    file is refused when its structure is not theirs (not a list of objects, an id that is not a
    whole number, a task_type other than color or position, several task types); values are
    kept as they are, and a row whose values do not fit is dropped and counted later."""
    if not isinstance(data, list) or not data or not all(isinstance(i, dict) for i in data):
        raise UsageError(
            "source", str(file), "must be a non-empty JSON list of objects (id, task_type, "
            "objects, attributes, handmade_caption, llm_caption) as generate_captions.py writes"
        )  # fmt: skip
    kinds = Counter(item.get("task_type") for item in data)
    unknown = [k for k in kinds if k not in TASK_TYPES]
    if unknown:
        raise UsageError(
            "source", str(file), f"task_type {unknown[0]!r}: must be color or position"
        )
    if len(kinds) > 1:
        raise UsageError(
            "source", str(file), f"mixes task types ({', '.join(sorted(kinds))}); import one "
            "task type at a time"
        )  # fmt: skip
    labels = TASK_TYPES[next(iter(kinds))]
    columns: dict[str, list] = {
        "id": [], "num_objects": [], "objects": [], labels: [], "handmade_caption": [],
        "handmade_image": [], "llm_caption": [], "llm_image": [],
    }  # fmt: skip
    for index, item in enumerate(data):
        ident = _item_id(file, index, item)
        columns["id"].append(ident)
        columns["num_objects"].append(_whole(item.get("num_objects")))  # None: dropped, counted
        columns["objects"].append(_strings(item.get("objects")))
        columns[labels].append(_strings(item.get("attributes", item.get(labels))))
        for kind in ("handmade", "llm"):
            text = item.get(f"{kind}_caption")
            columns[f"{kind}_caption"].append(text if isinstance(text, str) else None)
            columns[f"{kind}_image"].append(JSON_IMAGE.format(kind=kind, id=ident))
    schema = pa.schema(
        [
            ("id", pa.int64()), ("num_objects", pa.int64()), ("objects", pa.list_(pa.string())),
            (labels, pa.list_(pa.string())), ("handmade_caption", pa.string()),
            ("handmade_image", pa.string()), ("llm_caption", pa.string()),
            ("llm_image", pa.string()),
        ]
    )  # fmt: skip
    return pa.Table.from_pydict(columns, schema)
