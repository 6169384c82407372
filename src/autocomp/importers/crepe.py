"""CREPE (Ma et al., CVPR 2023): image-to-text retrieval among hard negatives, recall@k, as the
authors compute it (github.com/RAIVNLab/CREPE @ 1fa81c4).

Release layout, as `crepe_compo_eval_open_clip.py` (`gather_params`, lines 144-168) and
`crepe_eval_utils.py` (`BaseCsvDataset`, lines 17-36) read it: CSV files
`prod_hard_negatives/<atom|negate|swap>/prod_vg_hard_negs_<type>_complexity_<4..12>.csv`
(productivity: negatives in `hard_negs`) and
`syst_hard_negatives/syst_vg_hard_negs_<seen|unseen>_compounds_in_<dataset>.csv`
(systematicity: negatives in `valid_hard_negs_atom`, `valid_hard_negs_comp` and
`valid_hard_negs_combined`, one retrieval set each). Every file has `image_id`, `caption`, `x`,
`y`, `width`, `height`; a negatives cell is a Python list literal (`ast.literal_eval`, line 34).

Images: the script looks for `<image_id>.jpg` under two hard-coded Visual Genome folders
(`get_image_by_id`, lines 42-48, `/nlp/scr/irena/...`); here they are looked for under --images,
in `VG_100K/`, `VG_100K_2/` and the folder itself, the first found wins as in the script. The
region is cropped as `TF.crop(image, y, x, height, width)` (crepe_compo_eval_open_clip.py:46),
which is PIL's `crop((x, y, x + width, y + height))`, and the crop is embedded.

Scoring (`get_one2many_rank`, `get_one2many_metrics`, lines 60-76): the rank of the true caption
(index 0) among [caption, *negatives] sorted by descending score, and R@k = the share of images
whose rank is below k, k in 1, 3, 5, 10, per file (rule `recall-at-k`; each retrieval set is a
subset, the headline their mean). The script sorts with `torch.argsort(descending=True)`, which
leaves the order of equal scores unspecified; autocomp ranks a tie against the true caption
(rank = the negatives scoring at least as high: strict, a tie is never counted right) and
records that policy.
"""

from __future__ import annotations

import ast
import csv
import re
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.importers.harness import Group, Parsed

COMMON = ("image_id", "caption", "x", "y", "width", "height")
BOX = ("x", "y", "width", "height")
SYSTEMATICITY_KEYS = ("valid_hard_negs_atom", "valid_hard_negs_comp", "valid_hard_negs_combined")
FOLDERS = ("VG_100K", "VG_100K_2", ".")  # get_image_by_id's two folders, then --images itself
EXPECTS = (
    "give CREPE's prod_hard_negatives/ or syst_hard_negatives/ folder (data/*.zip extracted: "
    "prod_vg_hard_negs_<type>_complexity_<k>.csv with image_id, caption, x, y, width, height, "
    "hard_negs; syst_vg_hard_negs_<seen|unseen>_compounds_in_<data>.csv with "
    "valid_hard_negs_atom / _comp / _combined) or one such file"
)
PRODUCTIVITY = re.compile(r"prod_vg_hard_negs_(atom|negate|swap)_complexity_(\d+)")
SYSTEMATICITY = re.compile(r"syst_vg_hard_negs_(seen|unseen)_compounds_in_([A-Za-z0-9]+)")


def sets_of(file: Path, columns: list[str]) -> list[tuple[str, str]]:
    """(subset, negatives column) of each retrieval set a CREPE CSV holds, named from its file
    name as gather_params builds it; UsageError naming the expected columns otherwise."""
    missing = [c for c in COMMON if c not in columns]
    prod, syst = PRODUCTIVITY.fullmatch(file.stem), SYSTEMATICITY.fullmatch(file.stem)
    if prod and not missing and "hard_negs" in columns:
        return [(f"prod-{prod[1]}-complexity-{int(prod[2])}", "hard_negs")]
    if syst and not missing and all(k in columns for k in SYSTEMATICITY_KEYS):
        kinds = [k.rsplit("_", 1)[1] for k in SYSTEMATICITY_KEYS]
        return [(f"syst-{syst[1]}-{syst[2]}-{kind}", f"valid_hard_negs_{kind}") for kind in kinds]
    expected = (
        f"prod_vg_hard_negs_<type>_complexity_<k>.csv with {', '.join(COMMON)}, hard_negs; or "
        f"syst_vg_hard_negs_<seen|unseen>_compounds_in_<data>.csv with {', '.join(COMMON)}, "
        f"{', '.join(SYSTEMATICITY_KEYS)}"
    )
    raise UsageError(
        "source", str(file), f"is not a CREPE retrieval file (has {', '.join(columns)}; "
        f"expected {expected})"
    )  # fmt: skip


def negatives(cell: Any, where: str) -> list[str]:
    """A negatives cell: the Python list literal the script reads with ast.literal_eval (never
    evaluated as code: literal_eval reads literals only)."""
    try:
        value = ast.literal_eval(str(cell))
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        raise UsageError(
            "source", where, "has a negatives cell that is not a list literal"
        ) from None
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise UsageError("source", where, "has a negatives cell that is not a list of strings")
    return [str(v) for v in value]


def crop_box(row: dict[str, Any], where: str) -> tuple[float, float, float, float]:
    """PIL's crop box of a region: TF.crop(image, y, x, height, width) is
    `image.crop((x, y, x + width, y + height))` (PIL rounds the box)."""
    try:
        x, y, w, h = (float(row[k]) for k in BOX)
    except (TypeError, ValueError):
        raise UsageError(
            "source", where, f"has a box ({', '.join(BOX)}) that is not numbers"
        ) from None
    if w <= 0 or h <= 0:
        raise UsageError("source", where, "has a box of no width or height")
    return (x, y, x + w, y + h)


def _files(source: Path) -> list[Path]:
    if source.is_dir():
        files = sorted(p for p in source.rglob("*.csv") if not p.name.startswith("."))
        if not files:
            raise UsageError(
                "source", str(source), "holds no .csv files; give CREPE's prod_hard_negatives/ "
                "or syst_hard_negatives/ folder (data/*.zip extracted) or one of its files"
            )  # fmt: skip
        return files
    if not source.is_file():
        raise UsageError("source", str(source), "no such file or folder")
    return [source]


def _rows(file: Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        with file.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            return list(reader.fieldnames or []), rows
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise UsageError("source", str(file), f"is not a readable CSV file ({exc})") from None


def image_refs(image_id: str, where: str) -> list[str]:
    """The files `<image_id>.jpg` may be, in the order get_image_by_id looks (FOLDERS)."""
    name = f"{image_id.strip()}.jpg"
    if not image_id.strip() or Path(name).name != name or name.startswith("."):
        raise UsageError("source", where, f"has the image_id {image_id!r}, not a file stem")
    return [name if folder == "." else f"{folder}/{name}" for folder in FOLDERS]


def parse(source: Path) -> Parsed:
    """Every region of every retrieval set as a group: its crop x [caption, *negatives]."""
    groups, names = [], []
    for file in _files(source):
        columns, rows = _rows(file)
        sets = sets_of(file, columns)
        names.append(str(file.relative_to(source)) if source.is_dir() else file.name)
        for number, row in enumerate(rows):
            where = f"{file.name} row {number + 2}"  # the header is line 1
            refs = image_refs(row["image_id"], where)
            box = list(crop_box(row, where))
            image = {"path": refs[0], "also": refs[1:], "crop": box}
            for subset, column in sets:
                groups.append(Group(
                    subset=subset, group_id=str(number), images=(image,),
                    texts=(str(row["caption"]), *negatives(row[column], where)), truth=((0,),),
                    query="image", meta={"image_id": row["image_id"]},
                ))  # fmt: skip
    return Parsed(groups, names)
