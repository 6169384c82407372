"""Harness benchmarks: groups of images x texts, imported as rows the score stage scores as is.

Every benchmark of importers/benchmarks.py (Winoground, EqBen, MMVP-VLM, SPEC, ...) is a set of
groups; its official rule (autocomp.scoring.rules) is a function of a group's score matrix
S[image][text]. A parser (one module per benchmark) reads the release's files into `Group`s;
`import_harness` writes one benchmark row per image of a group (HARNESS_SCHEMA): the row's
candidates are the group's texts in group order (caption = texts[0], confusion_negatives =
texts[1:]), so the run's scores of row k, candidate t, are S[k][t] and no backend changes. The
row also says which texts are true for its image (`true_texts`), the group's `query` side, its
subset and the release's own fields (`meta`, JSON).

The legacy prediction rows a run writes for these rows (candidate 0 against the rest) are not
the benchmark's metric: the harness report (analysis/harness.py) reads the raw scores. A row of
one text (a group of one text: a lone SPEC text-to-image item) gets no prediction row, so a
resumed run scores it again; its scores are read once (the last kept).

Images: a release names files under --images (their decoded bytes are embedded) or embeds them
({bytes, path} structs); each is decoded in full before its group is accepted. A group with a
missing or undecodable image stops the import naming it, or with --skip-missing is dropped and
counted (a group is judged whole, so one bad image drops the group).
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.config import ImportConfig
from autocomp.errors import UsageError
from autocomp.importers import output
from autocomp.progress import row_progress
from autocomp.scoring.rules import QUERIES, RULES
from autocomp.store.catalog.schemas import HARNESS_SCHEMA
from autocomp.store.tables import provenance

BATCH_GROUPS = 32
Image = str | dict[str, Any]  # a file name under --images, an embedded {bytes, path} image, or
# a region of a file under --images: {path, also, crop} (`cropped`: ARO's and CREPE's crops)


@dataclass(frozen=True)
class Group:
    """One group of a benchmark: its images (rows of the matrix), its texts (columns), and per
    image the indices of the texts true for it. `query`: which side queries (scoring.rules)."""

    subset: str
    group_id: str
    images: tuple[Image, ...]
    texts: tuple[str, ...]
    truth: tuple[tuple[int, ...], ...]
    query: str = "both"
    meta: dict[str, Any] = field(default_factory=dict)
    prompts: tuple[str, ...] = ()  # per image: the question it is asked (VQA), else none
    query_texts: tuple[str, ...] = ()  # per row: the text that queries instead of the image

    def check(self, where: str) -> None:
        """The group is well formed (a parser's own check: a release's bad value is refused by
        the parser with the fix, this only guards the invariants)."""
        if not self.images or not self.texts or len(self.truth) != len(self.images):
            raise ValueError(f"{where}: a group needs images, texts and a truth per image")
        if any(t < 0 or t >= len(self.texts) for ts in self.truth for t in ts):
            raise ValueError(f"{where}: a true text index is out of range")
        if self.query_texts and len(self.query_texts) != len(self.images):
            raise ValueError(f"{where}: a text-only group needs one query text per row")
        if self.prompts and len(self.prompts) != len(self.images):
            raise ValueError(f"{where}: a group with prompts needs one per image")
        if self.query not in QUERIES:
            raise ValueError(f"{where}: query {self.query!r}")


@dataclass
class Parsed:
    """What a parser read: the groups, the files it read, and rows it dropped by reason."""

    groups: list[Group]
    files: list[str]
    dropped: Counter = field(default_factory=Counter)
    root: Path | None = None  # the folder the release holds its images in (None: --images)


Parser = Callable[[Path], Parsed]


@dataclass(frozen=True)
class HarnessBenchmark:
    """A registered harness benchmark (importers/benchmarks.py): its parser, its rule (a key of
    scoring.rules.RULES) with the tie policy its script applies, how its subsets combine
    (micro: pool the units; macro: the mean of the subsets'), the release files and columns it
    expects (named when a source is not that release), and the loader it follows."""

    name: str
    parse: Parser
    rule: str
    aggregate: str  # micro | macro
    expects: str  # the release's files / columns, as an error names them
    images: str  # what --images must be ("" = the release embeds its images)
    loader: str  # the repository and file of the authors' loader and scorer
    about: str

    @property
    def tie(self) -> str:
        return RULES[self.rule].official_tie


def _image_bytes(image: Image, root: Path | None) -> tuple[bytes | None, str]:
    """(bytes or None if missing, the name to report) of one image."""
    if isinstance(image, dict) and "crop" in image:
        return cropped(image, root)
    if isinstance(image, dict):
        data = image.get("bytes")
        return (bytes(data) if data else None), str(image.get("path") or "<embedded>")
    if root is None:
        raise UsageError("images", None, f"image {image!r} is a file name: give its folder")
    path = output.locate(root, image)
    if path is None:
        return None, str(root / image)
    if path.suffix.lower() == ".npy":  # EqBen's YouCook2 frames: BGR arrays (npy_image)
        return npy_image(path), str(path)
    return path.read_bytes(), str(path)


def cropped(image: dict[str, Any], root: Path | None) -> tuple[bytes | None, str]:
    """A region of a file under `root` as PNG bytes: {"path": file, "also": [other files it may
    be, looked for in order], "crop": [left, top, right, bottom]}, cut by PIL's `crop` (which
    rounds the box and pads outside the image with black) from the image converted to RGB, as
    ARO's and CREPE's loaders cut it; PNG keeps the crop's pixels exactly. A file that does not
    decode gives its own bytes (counted as not decoding)."""
    import io

    from PIL import Image as PILImage

    refs = [image["path"], *image.get("also", [])]
    if root is None:
        raise UsageError("images", None, f"image {refs[0]!r} is a file name: give its folder")
    found = next(((p, r) for p, r in ((output.locate(root, r), r) for r in refs) if p), None)
    if found is None:
        return None, str(root / refs[0])
    path, ref = found
    data = path.read_bytes()
    if output.image_problem(data) is not None:
        return data, str(path)
    buffer = io.BytesIO()
    with PILImage.open(io.BytesIO(data)) as opened:
        opened.convert("RGB").crop(tuple(image["crop"])).save(buffer, "PNG")
    return buffer.getvalue(), ref  # the stored name: the release's, no local path


def npy_image(path: Path) -> bytes:
    """A frame EqBen stores as a BGR uint8 array, as PNG bytes: what its loader's
    `process_img_npy` makes of it (`Image.fromarray(np.load(p)[:, :, [2, 1, 0]], "RGB")`); a
    file that is no such array gives bytes no decoder reads (counted as not decoding)."""
    import io

    import numpy as np
    from PIL import Image as PILImage

    try:
        array = np.load(path, allow_pickle=False)
        with io.BytesIO() as buffer:
            PILImage.fromarray(array[:, :, [2, 1, 0]], "RGB").save(buffer, "PNG")
            return buffer.getvalue()
    except (OSError, ValueError, IndexError, TypeError):
        return b"not an image"


def _usable(
    group: Group,
    loaded: list[tuple[bytes | None, str]],
    problems: list[str | None],
    config: ImportConfig,
    dropped: Counter,
    spec: HarnessBenchmark,
) -> bool:
    """Whether every image of the group is there and decodes; a bad one stops the import naming
    it, or (skip_missing) drops the group, counted by reason."""
    for (data, name), problem in zip(loaded, problems):
        if data is not None and problem is None:
            continue
        what = "is missing" if data is None else f"does not decode ({problem})"
        if not config.skip_missing:
            fix = f"give {spec.images}" if spec.images else "download the release again"
            raise UsageError(
                "images", name, f"{what} (group {group.subset}/{group.group_id}); {fix}, or pass "
                "--skip-missing to drop and count such groups",
            )  # fmt: skip
        reason = "image missing" if data is None else "image does not decode"
        dropped[f"{group.subset}: {reason}"] += 1
        return False
    return True


RESERVED = "all"  # the harness tables' headline row (analysis/harness.py): "all", "all (macro)"


def _unreserved(group: Group) -> Group:
    """A group whose subset a release names "all" (an EqBen file all.json) as "all (subset)":
    the report's headline rows are "all" and "all (micro|macro)"."""
    if group.subset == RESERVED or group.subset.startswith(f"{RESERVED} ("):
        return dataclasses.replace(group, subset=f"{group.subset} (subset)")
    return group


def group_rows(benchmark: str, group: Group) -> list[dict[str, Any]]:
    """The benchmark rows of one group (without images): one per image, its texts in order."""
    concept = f"{benchmark}-{group.subset}-{group.group_id}"
    texts = list(group.texts)
    negatives = texts[1:]
    meta = json.dumps(group.meta, sort_keys=True, ensure_ascii=False)
    rows = []
    for k, (image, truth) in enumerate(zip(group.images, group.truth)):
        ref = image if isinstance(image, str) else str(image.get("path") or "")
        rows.append({
            "concept_id": concept, "sample_id": f"{concept}/image-{k}",
            "family": f"{benchmark}-{group.subset}", "n": 0, "condition": "contextual",
            "paired": False, "benchmark": benchmark, "subset": group.subset,
            "group_id": group.group_id, "image_index": k, "group_images": len(group.images),
            "query": group.query, "texts": texts, "true_texts": list(truth), "image_ref": ref,
            "meta": meta, "prompt": group.prompts[k] if group.prompts else None,
            "query_text": group.query_texts[k] if group.query_texts else None,
            "caption": texts[0], "caption_rewritten": False, "protocol": "paper",
            "swap_negatives": [], "swap_arrangements": [], "swap_same_scene": [],
            "swap_in_confusion": [], "confusion_negatives": negatives,
            "confusion_arrangements": [-1] * len(negatives),
            "confusion_same_scene": [False] * len(negatives),
            "vary_attribute_negatives": [], "vary_object_negatives": [],
            "swap_chance": None, "confusion_chance": 1 / len(texts) if negatives else None,
            "vary_attribute_chance": None, "vary_object_chance": None,
        })  # fmt: skip
    return rows


def _accepted(
    spec: HarnessBenchmark,
    groups: Sequence[Group],
    root: Path | None,
    config: ImportConfig,
    dropped: Counter,
) -> list[Group]:
    """The groups whose every image decodes (the others stop the import, or are counted), in
    order; the images of BATCH_GROUPS groups are decoded together (output.image_problems)."""
    seen: set[tuple[str, str]] = set()
    for group in groups:
        key = (group.subset, group.group_id)
        if key in seen:
            raise UsageError(
                "source", f"{spec.name} group {group.subset}/{group.group_id}", "appears twice; "
                "give the release's files once"
            )  # fmt: skip
        seen.add(key)
    kept = []
    for start in range(0, len(groups), BATCH_GROUPS):
        batch = groups[start : start + BATCH_GROUPS]
        loaded = [[_image_bytes(image, root) for image in group.images] for group in batch]
        problems = iter(output.image_problems([d or b"" for images in loaded for d, _ in images]))
        for group, images in zip(batch, loaded):
            mine = [next(problems) for _ in images]
            if _usable(group, images, mine, config, dropped, spec):
                kept.append(group)
    return kept


def _tables(spec: HarnessBenchmark, groups: list[Group], root: Path | None) -> Iterator[pa.Table]:
    for start in range(0, len(groups), BATCH_GROUPS):
        rows, images = [], []
        for group in groups[start : start + BATCH_GROUPS]:
            rows += group_rows(spec.name, group)
            for image in group.images:
                data, name = _image_bytes(image, root)
                images.append({"bytes": data, "path": image if isinstance(image, str) else name})
        table = pa.Table.from_pylist(rows, HARNESS_SCHEMA)
        yield table.append_column("image", output.image_column(images))


def import_harness(
    spec: HarnessBenchmark,
    source: str | Path,
    out: str | Path,
    images: str | Path | None,
    config: ImportConfig,
) -> dict[str, Any]:
    """`autocomp import <benchmark>`: the release at `source` as a benchmark folder `out`."""
    out = output.check_out(out, config.force)
    if images is not None and not Path(images).is_dir():
        raise UsageError("images", images, f"is no folder; give {spec.images or 'none'}")
    parsed = spec.parse(Path(source))
    root = Path(images) if images is not None else parsed.root
    parsed.groups = [_unreserved(group) for group in parsed.groups]
    for group in parsed.groups:
        group.check(f"{spec.name} group {group.subset}/{group.group_id}")
    dropped = Counter(parsed.dropped)
    groups = _accepted(spec, parsed.groups, root, config, dropped)
    if not groups:
        raise UsageError("source", str(source), f"no group could be imported ({dict(dropped)})")
    rows = sum(len(g.images) for g in groups)
    per_subset = Counter(g.subset for g in groups)
    report = {
        "format": spec.name, "source": str(source), "files": parsed.files,
        "rule": spec.rule, "tie": spec.tie, "aggregate": spec.aggregate, "loader": spec.loader,
        "groups": len(groups), "samples": rows,
        "groups_by_subset": dict(sorted(per_subset.items())),
        "groups_dropped": dict(dropped.most_common()),
    }  # fmt: skip
    document = provenance(
        "benchmark", imported=spec.name, source=Path(source).name, harness=spec.name,
        rule=spec.rule, tie=spec.tie, aggregate=spec.aggregate,
        report={k: report[k] for k in ("groups", "samples", "groups_by_subset")},
    )  # fmt: skip
    keys = pa.Table.from_pylist(
        [{"family": f"{spec.name}-{g.subset}", "n": 0, "condition": "contextual"}
         for g in groups for _ in g.images]
    )  # fmt: skip
    with output.building(out, config.force) as folder:
        with row_progress("import: images", rows) as advance:
            output.write_parts(_tables(spec, groups, root), folder, rows, document, advance)
        output.finish(folder, out.name, keys, document, spec.about, report)
    return report


# ----------------------------------------------------------------------------- release records


def _jsonl(file: Path) -> list[Any]:
    out = []
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError("source", str(file), f"cannot be read ({exc})") from None
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except (ValueError, RecursionError) as exc:
                raise UsageError(
                    "source", f"{file} line {number}", f"is not JSON ({exc})"
                ) from None
    return out


def records(path: Path, columns: Sequence[str], expects: str) -> list[dict[str, Any]]:
    """The rows of a release file as dicts, checked to hold `columns`: a `.jsonl` file (one object
    a line), a `.json` list of objects, or Parquet / `datasets` files (sources.open_source). A
    file of another benchmark or version is refused naming the columns expected."""
    from autocomp.importers.sources import open_source, read_json

    if path.is_file() and path.suffix.lower() in (".jsonl", ".json"):
        data = _jsonl(path) if path.suffix.lower() == ".jsonl" else read_json(path)
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data) or not data:
            raise UsageError("source", str(path), f"must be a non-empty list of objects; {expects}")
        rows = data
        names = set().union(*(r.keys() for r in rows))
        missing = [c for c in columns if any(c not in r for r in rows)]
    else:
        source = open_source(path)
        names = set(source.schema.names)
        missing = [c for c in columns if c not in names]
        rows = [] if missing else [
            r for batch in source.batches(source.schema.names) for r in batch.to_pylist()
        ]  # fmt: skip
    if missing:
        raise UsageError(
            "source", str(path), f"lacks column(s) {', '.join(missing)} (it has "
            f"{', '.join(sorted(names))[:200]}): not this release; {expects}"
        )  # fmt: skip
    return rows


def text_of(row: dict[str, Any], column: str, where: str) -> str:
    """A non-empty string field of a release row (else UsageError naming it)."""
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        raise UsageError("source", where, f"{column} must be a non-empty string, not {value!r}")
    return value
