"""Import the Auto-Comp public release: its concepts, captions and images, our candidate sets.

Release rows (Parquet, a folder of Parquet, or a `datasets` save_to_disk folder) hold one concept
each: `objects` (Title-case Objects365 names), `colors` (the Color family) or `relations` (the
Position family, phrases such as "to the left of", N-1 per row), `handmade_caption` and
`handmade_image` (the Minimal sample), `llm_caption` and `llm_image` (the Contextual one). Images
are `datasets` Image structs ({bytes, path}) or file names under --images. `num_objects` and `id`
are used when present (checked against `objects`; kept as `release_id`).

Per row: every name is mapped onto the family's vocabulary (autocomp.importers.vocabulary);
the concept must be one the family can hold (its N range, distinct objects and labels, no
never-together pair); each caption, with renamed words rewritten to our names, must state its
concept (autocomp.protocol.binding, as for our own captions). A row or sample that fails is
dropped and counted by reason. The release's own negatives are never read (its substitution
collapses captions and loses the true swap): the candidate sets are rebuilt by our negatives
stage from the mapped concepts. Rows of one concept share `concept_id` (our content address of
the scene); `sample_id` is `<concept_id>/<condition>`; `paired` is true when both the Minimal
and the Contextual sample of the concept were imported (as `curate` sets it). A second release
row of the same scene is dropped as a duplicate.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from autocomp.config import ImportConfig, NegativesConfig
from autocomp.errors import UsageError
from autocomp.importers import output
from autocomp.importers.sources import TableSource, open_source
from autocomp.importers.vocabulary import Mapper
from autocomp.progress import row_progress
from autocomp.protocol.binding import BindingError, bind, word_pattern
from autocomp.protocol.concepts import Concept, concept_id
from autocomp.protocol.family import Family, load_family
from autocomp.protocol.stages import family_record, negatives_stage
from autocomp.store.catalog import ids
from autocomp.store.catalog.schemas import RELEASE_SAMPLES_SCHEMA
from autocomp.store.paths import OutsideRoot, resolve_inside
from autocomp.store.tables import provenance

FORMAT = "autocomp-release"
FAMILIES = {"colors": "color", "relations": "position"}  # label column -> family
CONDITIONS = {  # condition -> (caption column, image column)
    "minimal": ("handmade_caption", "handmade_image"),
    "contextual": ("llm_caption", "llm_image"),
}
COLUMNS = ("objects", *(c for pair in CONDITIONS.values() for c in pair))
HINT = (
    "give the Auto-Comp release rows (objects, colors or relations, handmade_caption, "
    "llm_caption, handmade_image, llm_image)"
)
ABOUT = (
    "Imported by autocomp from the Auto-Comp public release: its concepts, Minimal (handmade) "
    "and Contextual (LLM) captions and images, mapped onto autocomp's vocabularies; the Swap / "
    "Confusion candidate sets were rebuilt exactly by autocomp (the release's own were not used)."
)


@dataclass
class Tally:
    """What happened to the release's rows and samples, for the report."""

    rows: int = 0
    rows_dropped: Counter = field(default_factory=Counter)
    samples_dropped: Counter = field(default_factory=Counter)
    rewritten: int = 0


def label_column(source: TableSource) -> str:
    found = [c for c in FAMILIES if c in source.schema.names]
    if len(found) != 1:
        what = "both colors and relations" if found else "neither colors nor relations"
        raise UsageError("source", str(source.path), f"has {what}; {HINT}")
    return found[0]


def rewrite_names(caption: str, renamed: dict[str, str]) -> str:
    """The caption with each release name said as our entry ("brown cookies" -> "brown
    cookie"); a name whose entry the caption already says is left alone."""
    for release, ours in renamed.items():
        if word_pattern(ours).search(caption) is None:
            caption = word_pattern(release).sub(ours, caption)
    return caption


def concept_problem(family: Family, objects: list[str], labels: list[str]) -> str | None:
    """Why the family cannot hold this concept (None: it can)."""
    n = len(objects)
    if not family.n_min <= n <= family.n_max:
        return f"N={n} outside {family.name}'s range {family.n_min}-{family.n_max}"
    if len(labels) != (n - 1 if family.is_relation else n):
        return "label count does not fit N"
    if len(set(objects)) < n:
        return "an object repeats"
    keys = [family.meaning(lab) for lab in labels] if family.is_relation else labels
    if len(set(keys)) < len(keys):
        return "a label repeats"
    for vocab, names in ((family.objects, objects), (family.labels, labels)):
        for i, a in enumerate(names):
            if any(not vocab.compatible(a, b) for b in names[i + 1 :]):
                return f"never-together pair in {vocab.role}"
    if not family.is_relation and not all(family.label_allowed(lab, objects) for lab in labels):
        return "a label shares words with an object"
    return None


class _Mapping:
    """The mappers of one family and the caption rewriting their renames imply."""

    def __init__(self, family: Family) -> None:
        self.family = family
        self.objects = Mapper(family.objects)
        self.labels = Mapper(family.labels)

    def concept(self, objects: list[str], labels: list[str]) -> tuple[list, list, dict] | str:
        """(our objects, our labels, release name -> our name where the words differ), or the
        reason the row cannot be mapped."""
        ours = [self.objects.map(o) for o in objects]
        our_labels = [self.labels.map(lab) for lab in labels]
        if None in ours or None in our_labels:
            return f"unmapped {'object' if None in ours else self.family.attribute_label}"
        renamed = {
            r: o
            for r, o in zip([*objects, *labels], [*ours, *our_labels])
            if " ".join(r.split()).lower() != o.lower()
        }
        return ours, our_labels, renamed


def _missing(value: Any, root: Path | None) -> str | None:
    """What is missing of one release image (its file name, or "no image"); None if present."""
    if isinstance(value, dict):
        if value.get("bytes"):
            return None
        value = value.get("path")
    if not isinstance(value, str) or not value:
        return "no image"
    if root is None:
        return None  # reading it says what is wrong (no --images)
    try:
        path = resolve_inside(root, value)
    except OutsideRoot as exc:
        raise UsageError("images", value, f"refused: {exc}; fix the source") from None
    return None if path.is_file() else str(path)


def _presence(source: TableSource, root: Path | None) -> Iterator[dict[str, str | None]]:
    """Per release row and image column: what is missing (None: present). Embedded bytes are
    checked for length only, never converted."""
    columns = [image for _, image in CONDITIONS.values()]
    for batch in source.batches(columns):
        flags: dict[str, list[str | None]] = {}
        for name in columns:
            column = batch.column(name)
            if pa.types.is_struct(column.type) and "bytes" in column.type.names:
                length = pc.fill_null(pc.binary_length(column.field("bytes")), 0).to_pylist()
                paths = column.field("path").to_pylist() if "path" in column.type.names else None
                flags[name] = [
                    None if size else _missing(paths[i] if paths else None, root)
                    for i, size in enumerate(length)
                ]
            else:
                flags[name] = [_missing(v, root) for v in column.to_pylist()]
        for i in range(batch.num_rows):
            yield {name: flags[name][i] for name in columns}


@dataclass
class _Reader:
    """Pass 1 over the release (no image bytes): each row's samples, or why it has none."""

    family: Family
    labels_column: str
    config: ImportConfig
    mapping: _Mapping
    tally: Tally
    seen: set[str] = field(default_factory=set)

    def row(self, index: int, row: dict[str, Any], missing: dict) -> list[dict[str, Any]]:
        self.tally.rows += 1
        problem, mapped = _map_row(row, self.labels_column, self.mapping)
        if problem is None:
            ours, labels, _ = mapped
            cid = concept_id(
                self.family, Concept(self.family.name, len(ours), *map(tuple, (ours, labels)))
            )
            if cid in self.seen:
                problem = "duplicate concept (the same scene as an earlier row)"
        if problem is not None:
            self.tally.rows_dropped[problem] += 1
            return []
        self.seen.add(cid)
        out = [self.sample(index, row, missing, cid, mapped, c) for c in CONDITIONS]
        return [s for s in out if s is not None]

    def sample(
        self, index: int, row: dict[str, Any], missing: dict, cid: str, mapped: tuple,
        condition: str,
    ) -> dict[str, Any] | None:  # fmt: skip
        ours, labels, renamed = mapped
        caption_column, image_column = CONDITIONS[condition]
        text = row[caption_column]
        if not isinstance(text, str) or not text.strip():
            self.tally.samples_dropped[f"{condition}: no caption"] += 1
            return None
        if missing[image_column] is not None:
            if not self.config.skip_missing:
                raise UsageError(
                    "source", f"row {index} {image_column}",
                    f"the image is missing ({missing[image_column]}); restore it, or pass "
                    "--skip-missing to drop and count such samples",
                )  # fmt: skip
            self.tally.samples_dropped[f"{condition}: image missing"] += 1
            return None
        caption = rewrite_names(text, renamed)
        try:
            bind(self.family, ours, labels, caption)
        except BindingError as exc:
            self.tally.samples_dropped[f"{condition}: caption does not bind ({exc.reason})"] += 1
            return None
        self.tally.rewritten += caption != text
        return {
            "concept_id": cid, "sample_id": ids.sample_id(cid, condition),
            "family": self.family.name, "n": len(ours), "objects": ours, "attributes": labels,
            "condition": condition,
            "caption": caption, "paired": False, "release_row": index,
            "release_id": str(_first(row.get("id"), index)), "release_objects": row["objects"],
            "release_labels": row[self.labels_column], "release_caption": text,
        }  # fmt: skip


def _samples(source: TableSource, reader: _Reader, root: Path | None) -> list[dict[str, Any]]:
    """The samples of every mappable release row, in release order, with `paired` set as
    curate sets it (both conditions of the concept imported)."""
    extra = [c for c in ("id", "num_objects") if c in source.schema.names]
    rows = _rows(source.batches([*COLUMNS, reader.labels_column, *extra]))
    samples = []
    for index, (row, missing) in enumerate(zip(rows, _presence(source, root))):
        samples += reader.row(index, row, missing)
    conditions = Counter(s["concept_id"] for s in samples)
    for s in samples:
        s["paired"] = conditions[s["concept_id"]] == len(CONDITIONS)
    return samples


def _first(value: Any, default: Any) -> Any:
    return default if value is None else value


def _rows(batches: Iterator[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        yield from batch.to_pylist()


def _map_row(row: dict[str, Any], labels_column: str, mapping: _Mapping) -> tuple[str | None, Any]:
    objects, labels = row["objects"], row[labels_column]
    if not _words(objects) or not _words(labels):
        return f"objects or {labels_column} not a list of names", None
    n = row.get("num_objects")
    if n is not None and n != len(objects):
        return "num_objects disagrees with objects", None
    mapped = mapping.concept(objects, labels)
    if isinstance(mapped, str):
        return mapped, None
    problem = concept_problem(mapping.family, mapped[0], mapped[1])
    return problem, mapped


def _words(values: object) -> bool:
    return isinstance(values, list) and bool(values) and all(isinstance(v, str) for v in values)


def _image_value(value: Any, root: Path | None, where: str) -> dict[str, Any]:
    """A release image as the {bytes, path} struct of a benchmark folder."""
    if isinstance(value, dict) and value.get("bytes"):
        name = value.get("path") or where
        output.check_image(value["bytes"], name)
        return {"bytes": value["bytes"], "path": name}
    ref = value.get("path") if isinstance(value, dict) else value
    return {"bytes": output.read_image(root, str(ref)), "path": str(ref)}


def _with_images(bench: Path, source: TableSource, root: Path | None) -> Iterator[pa.Table]:
    """The benchmark rows with their images, joined to the release rows in one ordered pass."""
    columns = [image for _, image in CONDITIONS.values()]
    release = source.batches(columns)
    batch, start = None, 0
    for part in pq.ParquetFile(bench).iter_batches(batch_size=64):
        table = pa.Table.from_batches([part])
        values = []
        for row, condition in zip(table["release_row"].to_pylist(), table["condition"].to_pylist()):
            while batch is None or row >= start + batch.num_rows:
                start += batch.num_rows if batch is not None else 0
                batch = next(release)
            image_column = CONDITIONS[condition][1]
            value = batch.column(image_column)[row - start].as_py()
            values.append(_image_value(value, root, f"row {row} {image_column}"))
        yield table.append_column("image", output.image_column(values))


def import_release(
    source_path: str | Path,
    out: str | Path,
    images: str | Path | None = None,
    config: ImportConfig = ImportConfig(),
) -> dict[str, Any]:
    """`autocomp import autocomp-release`: write the benchmark folder; return the report."""
    out = output.check_out(out, config.force)
    source = open_source(source_path)
    labels_column = label_column(source)
    source.require(COLUMNS, HINT)
    root = Path(images) if images is not None else None
    if root is not None and not root.is_dir():
        raise UsageError("images", str(root), "is not a folder; give the release's image folder")
    family = load_family(FAMILIES[labels_column])
    mapping, tally = _Mapping(family), Tally()
    samples = _samples(source, _Reader(family, labels_column, config, mapping, tally), root)
    report = _report(source, family, samples, mapping, tally)
    if not samples:
        reasons = {**tally.rows_dropped, **tally.samples_dropped}
        top = ", ".join(f"{k}: {v}" for k, v in Counter(reasons).most_common(3)) or "no rows"
        raise UsageError("source", str(source.path), f"no sample could be imported ({top})")
    with output.building(out) as folder, tempfile.TemporaryDirectory(dir=folder) as work:
        concepts = Path(work) / "samples.parquet"
        pq.write_table(pa.Table.from_pylist(samples, RELEASE_SAMPLES_SCHEMA), concepts)
        bench = Path(work) / "benchmark.parquet"
        negatives = NegativesConfig(protocol=config.protocol, force=True)
        with row_progress("import: candidate sets", len(samples)) as advance:
            negatives_stage(concepts, bench, negatives, progress=advance)
        document = provenance(
            "benchmark", imported=FORMAT, source=str(Path(source_path).name),
            protocol=config.protocol, families={family.name: family_record(family)},
            report={k: report[k] for k in ("rows", "samples", "concepts", "paired_concepts")},
        )  # fmt: skip
        with row_progress("import: images", len(samples)) as advance:
            tables = _with_images(bench, source, root)
            output.write_parts(tables, folder, len(samples), document, advance)
        keys = pq.read_table(bench, columns=["family", "n", "condition"])
        output.finish(folder, Path(out).name, keys, document, ABOUT, report)
    return report


def _report(
    source: TableSource, family: Family, samples: list[dict], mapping: _Mapping, tally: Tally
) -> dict[str, Any]:
    concepts = {s["concept_id"] for s in samples}
    paired = {s["concept_id"] for s in samples if s["paired"]}
    return {
        "format": FORMAT,
        "source": str(source.path),
        "family": family.name,
        "rows": tally.rows,
        "rows_dropped": dict(tally.rows_dropped.most_common()),
        "samples": len(samples),
        "samples_by_condition": dict(Counter(s["condition"] for s in samples)),
        "samples_dropped": dict(tally.samples_dropped.most_common()),
        "captions_rewritten": tally.rewritten,
        "concepts": len(concepts),
        "paired_concepts": len(paired),
        "objects": mapping.objects.report(),
        mapping.labels.vocabulary.role: mapping.labels.report(),
    }
