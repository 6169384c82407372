"""Import SPEC: per subset, an image among texts differing in one attribute, and a text among
images (github.com/wjpoom/SPEC; data on huggingface.co/datasets/wjpoom/SPEC).

The release holds one folder per subset (absolute_size, relative_size, absolute_spatial,
relative_spatial, existence, count) with `image2text.json` (a list of {query: image path,
keys: candidate texts, label: index of the true one}) and `text2image.json` ({query: text,
keys: candidate image paths, label}); image paths are relative to the subset folder
(spec/dataset.py, Image2TextDataset / Text2ImageDataset). The source is the data root (every
subfolder holding both files) or one subset folder.

Groups: the image-to-text items sharing one candidate list are one group (their images x those
texts, query "image"); the text-to-image items sharing one candidate image list are one group
(those images x their query texts, query "text"). The rule is `retrieval`: i2t and t2i accuracy
per subset, the prediction an argmax as spec/models/clip_wrapper.py takes it (a tie goes to the
first candidate: policy `first`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.importers.harness import Group, Parsed
from autocomp.importers.sources import read_json

NAME = "spec"
FILES = ("image2text.json", "text2image.json")
EXPECTS = (
    "give SPEC's data root or a subset folder: image2text.json ({query: image, keys: texts, "
    "label}) and text2image.json ({query: text, keys: images, label}) per subset"
)


def _items(file: Path) -> list[tuple[str, list[str], int]]:
    data = read_json(file)
    if not isinstance(data, list) or not data:
        raise UsageError("source", str(file), f"must be a non-empty list; {EXPECTS}")
    out = []
    for index, item in enumerate(data):
        where = f"{file.parent.name}/{file.name} item {index}"
        ok = (
            isinstance(item, dict) and isinstance(item.get("query"), str)
            and isinstance(item.get("keys"), list) and item["keys"]
            and all(isinstance(k, str) for k in item["keys"])
            and isinstance(item.get("label"), int) and not isinstance(item["label"], bool)
        )  # fmt: skip
        if not ok:
            raise UsageError("source", where, f"is not a SPEC item (query, keys, label); {EXPECTS}")
        if not 0 <= item["label"] < len(item["keys"]):
            raise UsageError("source", where, f"label {item['label']} is outside its keys")
        out.append((item["query"], list(item["keys"]), item["label"]))
    return out


def _grouped(items: list[tuple[str, list[str], int]]) -> dict[tuple[str, ...], list[Any]]:
    groups: dict[tuple[str, ...], list[Any]] = {}
    for query, keys, label in items:
        groups.setdefault(tuple(keys), []).append((query, label))
    return groups


def _subset_groups(folder: Path, subset: str, prefix: str) -> list[Group]:
    """The groups of one subset folder; image paths as `<prefix><path>` under the root."""
    groups = []
    i2t = _grouped(_items(folder / FILES[0]))
    for n, (texts, members) in enumerate(i2t.items()):
        groups.append(Group(
            subset=subset, group_id=f"i2t-{n}",
            images=tuple(prefix + image for image, _ in members), texts=texts,
            truth=tuple((label,) for _, label in members), query="image",
        ))  # fmt: skip
    t2i = _grouped(_items(folder / FILES[1]))
    for n, (images, members) in enumerate(t2i.items()):
        texts = tuple(text for text, _ in members)
        truth = tuple(
            tuple(t for t, (_, label) in enumerate(members) if label == i)
            for i in range(len(images))
        )
        groups.append(Group(
            subset=subset, group_id=f"t2i-{n}", images=tuple(prefix + i for i in images),
            texts=texts, truth=truth, query="text",
        ))  # fmt: skip
    return groups


def parse(source: Path) -> Parsed:
    """Every subset under `source` (or `source` itself, one subset) as groups."""
    if not source.is_dir():
        raise UsageError("source", str(source), f"is no folder; {EXPECTS}")
    if all((source / f).is_file() for f in FILES):
        return Parsed(_subset_groups(source, source.name, ""), list(FILES), root=source)
    subsets = sorted(
        d for d in source.iterdir() if d.is_dir() and all((d / f).is_file() for f in FILES)
    )
    if not subsets:
        raise UsageError("source", str(source), f"holds no subset folder; {EXPECTS}")
    groups = [g for d in subsets for g in _subset_groups(d, d.name, f"{d.name}/")]
    return Parsed(groups, [f"{d.name}/{f}" for d in subsets for f in FILES], root=source)
