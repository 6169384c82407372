"""Import EqBen: pairs of two images (a visual-minimal change) x two captions, per subset.

The release (github.com/Wangt-CN/EqBen README, "Data Download") is JSON annotations with the
images under an image root; its loaders (src/eqben/eqben_utils.py) read three shapes, all
accepted here:

    a list of {image0, caption0, image1, caption1}         EqBenKubric, EqBenSD, and the 10 %
                                                            subset (eqben_subset_10percent_final)
    {video: [{image0, caption0, image1, caption1}, ...]}    EqBenGEBC, EqBenYoucook2
    {video: {subject: [{..., caption0: [..], ...}]}}        EqBenAG (the first caption of each
                                                            list, as its loader takes)

Image paths are relative to --images (the loaders' img_root). YouCook2 frames are `.npy` BGR
arrays, converted as its loader's `process_img_npy` converts them. The subset of a pair is the
first folder of its image0 path when it names an EqBen subset (eqbenag, eqbenyoucook2,
eqbengebc, eqbenkubric_loc, eqbenkubric_attr, eqbenkubric_cnt, eqbensd: what EqBenALL and
evaluate_eqben_locally.py split by), else the annotation file's name. The rule is
`cal_wino_score` (src/eqben/eqben_acc.py): Winoground's text / image / group with `>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.importers.harness import Group, Parsed, text_of
from autocomp.importers.sources import read_json

NAME = "eqben"
SUBSETS = (
    "eqbenag", "eqbenyoucook2", "eqbengebc", "eqbenkubric_loc", "eqbenkubric_attr",
    "eqbenkubric_cnt", "eqbensd",
)  # fmt: skip
FIELDS = ("image0", "caption0", "image1", "caption1")
EXPECTS = (
    "give an EqBen annotation JSON: a list of {image0, caption0, image1, caption1} (Kubric, SD, "
    "the 10% subset), {video: [pairs]} (GEBC, YouCook2) or {video: {subject: [pairs]}} (AG)"
)


def _pairs(data: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """(key, pair) of each pair in the file, in its order."""
    if isinstance(data, list):
        return [(str(i), pair) for i, pair in enumerate(data)]
    if not isinstance(data, dict):
        raise UsageError("source", where, f"is neither a list nor an object; {EXPECTS}")
    out = []
    for video, value in data.items():
        if isinstance(value, list):
            out += [(f"{video}/{i}", pair) for i, pair in enumerate(value)]
        elif isinstance(value, dict):
            for subject, frames in value.items():
                if not isinstance(frames, list):
                    raise UsageError("source", f"{where} {video}/{subject}", EXPECTS)
                out += [(f"{video}/{subject}/{i}", pair) for i, pair in enumerate(frames)]
        else:
            raise UsageError(
                "source", f"{where} {video}", f"holds {type(value).__name__}; {EXPECTS}"
            )
    return out


def _caption(pair: dict[str, Any], column: str, where: str) -> str:
    value = pair.get(column)
    if isinstance(value, list) and value:  # EqBenAG: a caption list, the first one is used
        value = value[0]
    return text_of({column: value}, column, where)


def _image(pair: dict[str, Any], column: str, where: str) -> str:
    return text_of(pair, column, where)


def parse(source: Path) -> Parsed:
    """The pairs of one annotation file as groups."""
    if not source.is_file():
        raise UsageError("source", str(source), f"is no file; {EXPECTS}")
    pairs = _pairs(read_json(source), str(source))
    if not pairs:
        raise UsageError("source", str(source), f"holds no pairs; {EXPECTS}")
    groups = []
    for key, pair in pairs:
        where = f"{source.name} pair {key}"
        missing = [f for f in FIELDS if not isinstance(pair, dict) or f not in pair]
        if missing and isinstance(pair, dict) and {"image", "caption"} <= set(pair):
            raise UsageError(
                "source", where, "holds single {image, caption} entries: the randomized "
                "annotation (ann_json_finegrained_random.json), whose pairing is private; give "
                "the 10% subset's annotation or a per-subset file of {image0, caption0, image1, "
                "caption1} pairs"
            )  # fmt: skip
        if missing:
            raise UsageError(
                "source", where, f"lacks {', '.join(missing)}: not an EqBen annotation; {EXPECTS}"
            )
        images = (_image(pair, "image0", where), _image(pair, "image1", where))
        first = images[0].replace("\\", "/").split("/")[0]
        subset = first if first in SUBSETS else source.stem
        groups.append(Group(
            subset=subset, group_id=key, images=images,
            texts=(_caption(pair, "caption0", where), _caption(pair, "caption1", where)),
            truth=((0,), (1,)), query="both",
        ))  # fmt: skip
    return Parsed(groups, [source.name])
