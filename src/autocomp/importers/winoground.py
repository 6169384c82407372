"""Import Winoground: 400 groups of two images and two captions (facebook/winoground).

The release (huggingface.co/datasets/facebook/winoground) is `data/examples.jsonl`, one object a
line: id, image_0, image_1 (file stems: "ex_0_img_0"), caption_0, caption_1, tag,
secondary_tag, num_main_preds, collapsed_tag; and `data/images.zip`, whose `images/` folder
holds `<stem>.png` (the dataset's loading script, winoground.py, and EqBen's loader
src/eqben/eqben_utils.py `Winoground` both join `image_0 + ".png"` to the image folder). The
Parquet conversion of the same rows (image_0 / image_1 embedded) is read alike, with no
--images.

Each example is one group: images (image_0, image_1), texts (caption_0, caption_1), caption k
true for image k; the rule is Winoground's text / image / group score (scoring.rules,
`text-image-group`, ties wrong as its `>`), the subset its collapsed_tag (Object, Relation,
Both), pooled for the headline as the paper's 400.
"""

from __future__ import annotations

from pathlib import Path

from autocomp.importers.harness import Group, Parsed, records, text_of

NAME = "winoground"
COLUMNS = ("id", "image_0", "image_1", "caption_0", "caption_1")
EXPECTS = (
    "give Winoground's data/examples.jsonl (id, image_0, image_1, caption_0, caption_1, tag, "
    "secondary_tag, num_main_preds, collapsed_tag) or its Parquet conversion"
)
KEPT = ("id", "tag", "secondary_tag", "num_main_preds", "collapsed_tag")


def _image(value: object, where: str) -> str | dict:
    """An image column's value: a stem ("ex_0_img_0" -> ex_0_img_0.png) or an embedded image."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip():
        return value if Path(value).suffix else f"{value}.png"
    from autocomp.errors import UsageError

    raise UsageError("source", where, f"an image must be a file stem or an image, not {value!r}")


def parse(source: Path) -> Parsed:
    """The examples of `source` as groups."""
    rows = records(_file(source), COLUMNS, EXPECTS)
    groups = []
    for index, row in enumerate(rows):
        where = f"{source} example {row.get('id', index)}"
        texts = (text_of(row, "caption_0", where), text_of(row, "caption_1", where))
        groups.append(Group(
            subset=str(row.get("collapsed_tag") or "untagged"), group_id=str(row["id"]),
            images=(_image(row["image_0"], where), _image(row["image_1"], where)),
            texts=texts, truth=((0,), (1,)), query="both",
            meta={k: row[k] for k in KEPT if k in row and not isinstance(row[k], dict)},
        ))  # fmt: skip
    return Parsed(groups, [_file(source).name])


def _file(source: Path) -> Path:
    """examples.jsonl inside a folder given (the repo's data/ folder or its root)."""
    if source.is_dir():
        for candidate in (source / "examples.jsonl", source / "data" / "examples.jsonl"):
            if candidate.is_file():
                return candidate
    return source
