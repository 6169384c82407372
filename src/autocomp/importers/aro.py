"""ARO (Yuksekgonul et al., ICLR 2023): VG-Relation and VG-Attribution, parsed and scored as
the authors do (github.com/mertyg/vision-language-models-are-bows @ 81fdd20).

Release layout, as `dataset_zoo/aro_datasets.py` reads it (`VG_Relation`, `VG_Attribution`):
`visual_genome_relation.json` / `visual_genome_attribution.json`, each a JSON list of items
{image_path, bbox_x, bbox_y, bbox_w, bbox_h, true_caption, false_caption} plus `relation_name`
(VG-Relation) or `attributes` ([first, second], VG-Attribution), the images under `images/`
(--images). Each image is cropped to its box as `__getitem__` crops it (PIL `crop((x, y, x + w,
y + h))`, lines 55-56 and 145-146) and the crop is embedded, so the pixels a model sees are the
script's.

Scoring (`evaluate_scores`, lines 75-101 and 166-190): the options are [false, true] and the
prediction is `np.argmax`, which returns the first maximum, so a tie picks the false caption:
strict `>` (a tie counts as wrong; rule `image-to-text`). VG-Relation: accuracy per relation,
then the mean over the relations the authors' notebook keeps (it leaves out the symmetric ones
it lists, cell 4). VG-Attribution: accuracy per attribute pair (`<first>_<second>`, line 138)
with at least 25 items (line 183), then the mean (cell 6). So each relation or pair is a subset,
the headline is the macro over subsets, and the items the authors leave out of it (symmetric
relations; pairs with fewer than 25 items in the file) are counted in the import report and not
imported. The micro accuracy over the kept items is reported beside it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.importers.harness import Group, Parsed
from autocomp.importers.sources import read_json

# notebooks/Replicate ARO! VG-Relation, VG-Attribution.ipynb, cell 4: left out of the macro
SYMMETRIC = frozenset(
    ("adjusting", "attached to", "between", "bigger than", "biting", "boarding", "brushing",
     "chewing", "cleaning", "climbing", "close to", "coming from", "coming out of", "contain",
     "crossing", "dragging", "draped over", "drinking", "drinking from", "driving",
     "driving down", "driving on", "eating from", "eating in", "enclosing", "exiting", "facing",
     "filled with", "floating in", "floating on", "flying", "flying above", "flying in",
     "flying over", "flying through", "full of", "going down", "going into", "going through",
     "grazing in", "growing in", "growing on", "guiding", "hanging from", "hanging in",
     "hanging off", "hanging over", "higher than", "holding onto", "hugging", "in between",
     "jumping off", "jumping on", "jumping over", "kept in", "larger than", "leading",
     "leaning over", "leaving", "licking", "longer than", "looking in", "looking into",
     "looking out", "looking over", "looking through", "lying next to", "lying on top of",
     "making", "mixed with", "mounted on", "moving", "on the back of", "on the edge of",
     "on the front of", "on the other side of", "opening", "painted on", "parked at",
     "parked beside", "parked by", "parked in", "parked in front of", "parked near",
     "parked next to", "perched on", "petting", "piled on", "playing", "playing in",
     "playing on", "playing with", "pouring", "reaching for", "reading", "reflected on",
     "riding on", "running in", "running on", "running through", "seen through",
     "sitting behind", "sitting beside", "sitting by", "sitting in front of", "sitting near",
     "sitting next to", "sitting under", "skiing down", "skiing on", "sleeping in",
     "sleeping on", "smiling at", "sniffing", "splashing", "sprinkled on", "stacked on",
     "standing against", "standing around", "standing behind", "standing beside",
     "standing in front of", "standing near", "standing next to", "staring at", "stuck in",
     "surrounding", "swimming in", "swinging", "talking to", "topped with", "touching",
     "traveling down", "traveling on", "tying", "typing on", "underneath", "wading in",
     "waiting for", "walking across", "walking by", "walking down", "walking next to",
     "walking through", "working in", "working on", "worn on", "wrapped around", "wrapped in",
     "by", "of", "near", "next to", "with", "beside", "on the side of", "around")
)  # fmt: skip
MIN_PAIR_ITEMS = 25  # aro_datasets.py:183: attribute pairs with fewer items are left out
EXPECTS = (
    "give ARO's root folder (visual_genome_relation.json / visual_genome_attribution.json: a "
    "list of items with image_path, bbox_x, bbox_y, bbox_w, bbox_h, true_caption, "
    "false_caption and relation_name or attributes) or one of those files"
)
BOX = ("bbox_x", "bbox_y", "bbox_w", "bbox_h")
COMMON = ("image_path", *BOX, "true_caption", "false_caption")
KEPT = ("image_id", "relation_name", "attributes", "obj1_name", "obj2_name", "image_path")


def _relation_key(item: dict[str, Any]) -> str:
    return str(item["relation_name"])


def _pair_key(item: dict[str, Any]) -> str:
    first, second = item["attributes"][0], item["attributes"][1]
    return f"{first}_{second}"


# subset -> the release file its loader reads, the keys an item needs, its macro key
SUBSETS: dict[str, dict[str, Any]] = {
    "vg-relation": {
        "file": "visual_genome_relation.json",
        "keys": (*COMMON, "relation_name"),
        "key": _relation_key,
    },
    "vg-attribution": {
        "file": "visual_genome_attribution.json",
        "keys": (*COMMON, "attributes"),
        "key": _pair_key,
    },
}


def subset_of(file_name: str, first_item: dict[str, Any]) -> str:
    """The subset a release file holds: by the loader's file name, else by the keys its items
    carry (a renamed file); UsageError naming the expected keys when neither fits."""
    for subset, spec in SUBSETS.items():
        if file_name == spec["file"]:
            return subset
    for subset, spec in SUBSETS.items():
        if all(k in first_item for k in spec["keys"]):
            return subset
    expected = "; ".join(f"{s['file']}: {', '.join(s['keys'])}" for s in SUBSETS.values())
    raise UsageError("source", file_name, f"is not an ARO VG file (items need the keys {expected})")


def check_item(item: Any, subset: str, where: str) -> None:
    """An item of `subset` with every key its loader reads, of the right kinds."""
    keys = SUBSETS[subset]["keys"]
    missing = [k for k in keys if not isinstance(item, dict) or k not in item]
    if missing:
        raise UsageError(
            "source", where, f"lacks {', '.join(missing)}: an ARO {subset} item has "
            f"{', '.join(keys)} (is this the other ARO file, or another benchmark's?)"
        )  # fmt: skip
    bad = [k for k in BOX if isinstance(item[k], bool) or not isinstance(item[k], int | float)]
    bad += [
        k for k in ("true_caption", "false_caption", "image_path") if not isinstance(item[k], str)
    ]
    if subset == "vg-attribution":
        pair = item["attributes"]
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(a, str) for a in pair)
        ):
            bad.append("attributes")
    if bad:
        raise UsageError("source", where, f"has {', '.join(bad)} of the wrong kind")


def crop_box(item: dict[str, Any]) -> tuple[float, float, float, float]:
    """PIL's crop box of an item: aro_datasets.py:56 (left, top, right, bottom)."""
    x, y, w, h = (item[k] for k in BOX)
    return (x, y, x + w, y + h)


# ----------------------------------------------------------------------------- the release


def _files(source: Path, subset: str) -> list[Path]:
    """The release file of `subset` in `source` (the ARO root, its file, or a renamed file)."""
    if source.is_dir():
        file = source / SUBSETS[subset]["file"]
        if not file.is_file():
            raise UsageError(
                "source", str(source), f"holds no {SUBSETS[subset]['file']}; give ARO's "
                "root folder (the one dataset_zoo's loader downloads into) or that file"
            )  # fmt: skip
        return [file]
    if not source.is_file():
        raise UsageError("source", str(source), "no such file or folder")
    return [source]


def parse_subset(source: Path, subset: str) -> Parsed:
    """The items of one VG subset as groups of one cropped image x [true, false] captions,
    grouped for the macro by relation (VG-Relation) or attribute pair (VG-Attribution)."""
    file = _files(source, subset)[0]
    items = read_json(file)
    if not isinstance(items, list) or not items:
        raise UsageError(
            "source", str(file), f"must be a non-empty JSON list of ARO {subset} items"
        )
    found = subset_of(file.name, items[0] if isinstance(items[0], dict) else {})
    if found != subset:
        raise UsageError(
            "source", str(file), f"holds ARO {found} items; give {SUBSETS[subset]['file']} "
            f"(items with {', '.join(SUBSETS[subset]['keys'])})"
        )  # fmt: skip
    key = SUBSETS[subset]["key"]
    for index, item in enumerate(items):
        check_item(item, subset, f"{file.name} item {index}")
    sizes = Counter(key(item) for item in items)
    groups: list[Group] = []
    dropped: Counter = Counter()
    for index, item in enumerate(items):
        reason = left_out(subset, key(item), sizes)
        if reason:
            dropped[f"{key(item)}: {reason}"] += 1
            continue
        groups.append(Group(
            subset=key(item), group_id=str(index),
            images=({"path": item["image_path"], "crop": list(crop_box(item))},),
            texts=(item["true_caption"], item["false_caption"]), truth=((0,),), query="image",
            meta={k: item[k] for k in KEPT if isinstance(item.get(k), str | int | list)},
        ))  # fmt: skip
    return Parsed(groups, [file.name], dropped)


def left_out(subset: str, key: str, sizes: Counter) -> str:
    """Why the authors leave an item's relation or pair out of their macro ("" if they keep
    it)."""
    if subset == "vg-relation" and key in SYMMETRIC:
        return "a symmetric relation (the authors' notebook leaves it out)"
    if subset == "vg-attribution" and sizes[key] < MIN_PAIR_ITEMS:
        return f"an attribute pair with fewer than {MIN_PAIR_ITEMS} items (aro_datasets.py:183)"
    return ""


def parse_relation(source: Path) -> Parsed:
    return parse_subset(source, "vg-relation")


def parse_attribution(source: Path) -> Parsed:
    return parse_subset(source, "vg-attribution")
