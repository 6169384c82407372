"""Import the Auto-Comp public release: its concepts, captions and images, our candidate sets.

Every layout the release's own scripts read or write is a source (autocomp.importers.layouts):
the Paired hub repos (objects, colors | relations, handmade_* and llm_* columns), the
Minimal-only and Contextual-only hub repos (caption / image; the condition from the repo's name
or ImportConfig.condition), and the generation scripts' JSON (id, task_type, attributes; images
at handmade/concept_{id:05d}_handmade.webp and llm/..._llm.webp under one --images root). Each
source is Parquet, a folder of Parquet, a `datasets` save_to_disk folder or a JSON file
(autocomp.importers.sources). Images are `datasets` Image structs ({bytes, path}) or file names
under --images; every image is decoded in full before its sample is accepted. `num_objects`
and `id` are used when present (checked against `objects`; kept as `release_id`).

Per row: every name is mapped onto the family's vocabulary (autocomp.importers.vocabulary);
the concept must be one the family can hold (its N range, distinct objects and labels, no
never-together pair); each caption is kept exactly as the release wrote it and must state its
concept in its own words (autocomp.importers.words: names are mapped, words never changed). A
row or sample that fails is dropped and counted by reason in import_report.json; a missing or
undecodable image stops the import naming it, unless `skip_missing` drops and counts it. The
release's own negatives are never read (its substitution collapses captions and loses the true
swap): the candidate sets are built as our negatives stage builds them (the same
autocomp.protocol.candidate_columns), with the caption's own words in the holes. Rows of one
concept share `concept_id` (our content address of the scene); `sample_id` is
`<concept_id>/<condition>`; `paired` is true when both the Minimal and the Contextual sample of
the concept were imported (as `curate` sets it). A second row of the same scene is dropped as a
duplicate (and in JSON, a second row with the same id: its images are the first row's).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.config import ImportConfig
from autocomp.errors import ProtocolError, UsageError
from autocomp.importers import output
from autocomp.importers.layouts import Layout, json_rows, layout_of
from autocomp.importers.sources import TableSource, open_source
from autocomp.importers.vocabulary import Mapper
from autocomp.importers.words import WrittenFamilies, as_written
from autocomp.progress import row_progress
from autocomp.protocol.candidate_columns import CaptionRow, candidate_columns
from autocomp.protocol.concepts import Concept, concept_id
from autocomp.protocol.family import Family, load_family
from autocomp.protocol.stages import family_record
from autocomp.store.catalog import ids
from autocomp.store.catalog.schemas import BENCHMARK_FIELDS
from autocomp.store.catalog.schemas import RELEASE_BENCHMARK_SCHEMA as BENCH_SCHEMA
from autocomp.store.tables import provenance

FORMAT = "autocomp-release"
ABOUT = (
    "Imported by autocomp from the Auto-Comp public release: its concepts, Minimal (handmade) "
    "and Contextual (LLM) captions and images, the concepts mapped onto autocomp's vocabularies "
    "and the captions kept as the release wrote them; the Swap / Confusion candidate sets were "
    "rebuilt exactly by autocomp (the release's own were not used)."
)
BATCH = 256


@dataclass
class Tally:
    """What happened to the release's rows and samples, for the report."""

    rows: int = 0
    rows_dropped: Counter = field(default_factory=Counter)
    samples_dropped: Counter = field(default_factory=Counter)
    images_decoded: int = 0


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
    """The mappers of one family."""

    def __init__(self, family: Family) -> None:
        self.family = family
        self.objects = Mapper(family.objects)
        self.labels = Mapper(family.labels)

    def concept(self, objects: list[str], labels: list[str]) -> tuple[list, list] | str:
        """(our objects, our labels), or the reason the row cannot be mapped."""
        ours = [self.objects.map(o) for o in objects]
        our_labels = [self.labels.map(lab) for lab in labels]
        if None in ours or None in our_labels:
            return f"unmapped {'object' if None in ours else self.family.attribute_label}"
        return ours, our_labels


def _words(values: object) -> bool:
    return isinstance(values, list) and bool(values) and all(isinstance(v, str) for v in values)


@dataclass
class _Reader:
    """Pass 1 over the release: each row's samples, or why it has none; images decoded."""

    family: Family
    layout: Layout
    config: ImportConfig
    root: Path | None
    mapping: _Mapping
    tally: Tally
    written: WrittenFamilies
    seen: set[str] = field(default_factory=set)
    ids: set[int] = field(default_factory=set)

    def row_problem(self, row: dict[str, Any]) -> tuple[str | None, Any]:
        objects, labels = row["objects"], row[self.layout.labels]
        if not _words(objects) or not _words(labels):
            return f"objects or {self.layout.labels} not a list of names", None
        n = row.get("num_objects")
        if n is not None and n != len(objects):
            return "num_objects disagrees with objects", None
        if self.layout.name == "json":
            if row["id"] in self.ids:
                return "duplicate id (its images are an earlier row's)", None
            self.ids.add(row["id"])
        mapped = self.mapping.concept(objects, labels)
        if isinstance(mapped, str):
            return mapped, None
        problem = concept_problem(self.family, *mapped)
        if problem is None:
            ours = mapped[0]
            cid = concept_id(self.family, Concept(self.family.name, len(ours), *map(tuple, mapped)))
            if cid in self.seen:
                return "duplicate concept (the same scene as an earlier row)", None
            self.seen.add(cid)
            return None, (cid, *mapped)
        return problem, None

    def sample(
        self, index: int, row: dict[str, Any], mapped: tuple, condition: str
    ) -> dict[str, Any] | None:
        """The sample of one condition of a mapped row (its image not yet checked)."""
        cid, ours, labels = mapped
        caption_column, _ = self.layout.conditions[condition]
        text = row[caption_column]
        if not isinstance(text, str) or not text.strip():
            self.tally.samples_dropped[f"{condition}: no caption"] += 1
            return None
        release = (row["objects"], row[self.layout.labels])
        written = as_written(self.written, (ours, labels), release, text)
        if isinstance(written, str):
            self.tally.samples_dropped[f"{condition}: caption {written}"] += 1
            return None
        return {
            "concept_id": cid, "sample_id": ids.sample_id(cid, condition),
            "family": self.family.name, "n": len(ours), "objects": ours, "attributes": labels,
            "condition": condition, "caption": text, "paired": False, "release_row": index,
            "release_id": str(index if row.get("id") is None else row["id"]),
            "release_objects": release[0], "release_labels": release[1], "release_caption": text,
            "_written": written,
        }  # fmt: skip

    def batch(self, start: int, batch: pa.RecordBatch) -> list[dict[str, Any]]:
        """The samples of one batch of release rows whose images decode."""
        rows = batch.to_pylist()
        pending: list[tuple[dict[str, Any], Any]] = []
        for i, row in enumerate(rows):
            self.tally.rows += 1
            problem, mapped = self.row_problem(row)
            if problem is not None:
                self.tally.rows_dropped[problem] += 1
                continue
            for condition, (_, image_column) in self.layout.conditions.items():
                sample = self.sample(start + i, row, mapped, condition)
                if sample is not None:
                    pending.append((sample, row[image_column]))
        return self.images(pending)

    def images(self, pending: list[tuple[dict[str, Any], Any]]) -> list[dict[str, Any]]:
        """The samples whose image is there and decodes in full."""
        found: list[tuple[dict[str, Any], bytes, str]] = []
        for sample, value in pending:
            name = (value.get("path") if isinstance(value, dict) else value) or ""
            data = self.image_bytes(sample, value, str(name))
            if data is not None:
                found.append((sample, data, str(name)))
        problems = output.image_problems([data for _, data, _ in found])
        self.tally.images_decoded += len(found)
        kept = []
        for (sample, _, name), problem in zip(found, problems):
            if problem is None:
                kept.append(sample)
            else:
                self.drop_image(sample, "does not decode", problem, name)
        return kept

    def image_bytes(self, sample: dict[str, Any], value: Any, name: str) -> bytes | None:
        if isinstance(value, dict) and value.get("bytes"):
            return value["bytes"]
        if not name:
            self.drop_image(sample, "missing", "no image")
            return None
        if self.root is None:
            raise UsageError("images", None, f"image {name!r} is a file name: give its folder")
        try:
            return output.read_image(self.root, name, flat=self.layout.name == "json")
        except output.MissingImage as exc:
            self.drop_image(sample, "missing", str(exc))
            return None

    def drop_image(self, sample: dict[str, Any], what: str, detail: str, name: str = "") -> None:
        """A sample without a usable image: stop naming it, or (skip_missing) count it."""
        condition = sample["condition"]
        if not self.config.skip_missing:
            column = self.layout.conditions[condition][1]
            said = "is missing" if what == "missing" else what
            named = f" {name}" if name and what != "missing" else ""
            raise UsageError(
                "source", f"row {sample['release_row']} {column}",
                f"the image{named} {said} ({detail}); restore it, or pass --skip-missing to "
                "drop and count such samples",
            )  # fmt: skip
        self.tally.samples_dropped[f"{condition}: image {what}"] += 1


def _samples(
    source: TableSource, reader: _Reader, advance: Callable[[int], None]
) -> list[dict[str, Any]]:
    """The samples of every mappable release row, in release order, with `paired` set as
    curate sets it (both conditions of the concept imported)."""
    layout = reader.layout
    extra = [c for c in ("id", "num_objects") if c in source.schema.names]
    samples, start = [], 0
    for batch in source.batches([*layout.columns, *extra]):
        samples += reader.batch(start, batch)
        start += batch.num_rows
        advance(batch.num_rows)
    conditions = Counter(s["concept_id"] for s in samples)
    for s in samples:
        s["paired"] = conditions[s["concept_id"]] == 2
    return samples


def _benchmark(samples: list[dict[str, Any]], protocol: str, path: Path) -> None:
    """The benchmark rows (the samples' columns, then the candidate sets) as one Parquet file."""
    with pq.ParquetWriter(path, BENCH_SCHEMA) as writer:
        for start in range(0, len(samples), BATCH):
            chunk = samples[start : start + BATCH]
            rows = [
                CaptionRow(w.family, w.objects, w.labels, s["caption"], w.template)
                for s in chunk
                for w in [s["_written"]]
            ]
            try:
                columns = candidate_columns(rows, protocol)
            except ProtocolError as exc:
                raise UsageError(
                    "source", f"rows {chunk[0]['release_row']}-{chunk[-1]['release_row']}",
                    f"candidate sets cannot be built ({exc})",
                ) from exc  # fmt: skip
            plain = [
                {("source_caption" if k == "caption" else k): v for k, v in s.items()
                 if not k.startswith("_")}
                for s in chunk
            ]  # fmt: skip
            data = {name: [r[name] for r in plain] for name in plain[0]}
            data.update({name: columns[name] for name, _ in BENCHMARK_FIELDS})
            writer.write_table(pa.Table.from_pydict(data, BENCH_SCHEMA))


def _image_value(value: Any, root: Path | None, where: str, flat: bool) -> dict[str, Any]:
    """A release image as the {bytes, path} struct of a benchmark folder (decoded in pass 1)."""
    if isinstance(value, dict) and value.get("bytes"):
        return {"bytes": value["bytes"], "path": value.get("path") or where}
    ref = value.get("path") if isinstance(value, dict) else value
    try:
        return {"bytes": output.read_image(root, str(ref), flat=flat), "path": str(ref)}
    except output.MissingImage as exc:
        raise UsageError("images", str(exc), f"{where}: vanished during the import") from None


def _with_images(bench: Path, source: TableSource, layout: Layout, root: Path | None) -> Iterator:
    """The benchmark rows with their images, joined to the release rows in one ordered pass."""
    release = source.batches(layout.image_columns)
    batch, start = None, 0
    for part in pq.ParquetFile(bench).iter_batches(batch_size=64):
        table = pa.Table.from_batches([part])
        values = []
        for row, condition in zip(table["release_row"].to_pylist(), table["condition"].to_pylist()):
            while batch is None or row >= start + batch.num_rows:
                start += batch.num_rows if batch is not None else 0
                batch = next(release)
            image_column = layout.conditions[condition][1]
            value = batch.column(image_column)[row - start].as_py()
            where = f"row {row} {image_column}"
            values.append(_image_value(value, root, where, layout.name == "json"))
        yield table.append_column("image", output.image_column(values))


def import_release(
    source_path: str | Path,
    out: str | Path,
    images: str | Path | None = None,
    config: ImportConfig = ImportConfig(),
) -> dict[str, Any]:
    """`autocomp import autocomp-release`: write the benchmark folder; return the report."""
    out = output.check_out(out, config.force)
    source = open_source(source_path, json_rows)
    layout = layout_of(source, config.condition)
    root = Path(images) if images is not None else None
    if root is not None and not root.is_dir():
        raise UsageError("images", str(root), "is not a folder; give the release's image folder")
    if root is None and layout.name == "json":
        raise UsageError(
            "images", None, "the JSON names image files: give the folder holding handmade/ and "
            "llm/ (generate_images.py's --output_dir)"
        )  # fmt: skip
    family = load_family(layout.family)
    mapping, tally = _Mapping(family), Tally()
    reader = _Reader(family, layout, config, root, mapping, tally, WrittenFamilies(family))
    with row_progress("import: rows and images", None) as advance:
        samples = _samples(source, reader, advance)
    report = _report(source, layout, family, samples, mapping, tally)
    if not samples:
        reasons = {**tally.rows_dropped, **tally.samples_dropped}
        top = ", ".join(f"{k}: {v}" for k, v in Counter(reasons).most_common(3)) or "no rows"
        raise UsageError("source", str(source.path), f"no sample could be imported ({top})")
    with (
        output.building(out, config.force) as folder,
        tempfile.TemporaryDirectory(dir=folder) as work,
    ):
        bench = Path(work) / "benchmark.parquet"
        with row_progress("import: candidate sets", len(samples)) as advance:
            _benchmark(samples, config.protocol, bench)
            advance(len(samples))
        document = provenance(
            "benchmark", imported=FORMAT, source=str(Path(source_path).name),
            protocol=config.protocol, families={family.name: family_record(family)},
            report={k: report[k] for k in ("rows", "samples", "concepts", "paired_concepts")},
        )  # fmt: skip
        with row_progress("import: images", len(samples)) as advance:
            tables = _with_images(bench, source, layout, root)
            output.write_parts(tables, folder, len(samples), document, advance)
        keys = pq.read_table(bench, columns=["family", "n", "condition"])
        output.finish(folder, Path(out).name, keys, document, ABOUT, report)
    return report


def _report(
    source: TableSource, layout: Layout, family: Family, samples: list[dict],
    mapping: _Mapping, tally: Tally,
) -> dict[str, Any]:  # fmt: skip
    concepts = {s["concept_id"] for s in samples}
    paired = {s["concept_id"] for s in samples if s["paired"]}
    return {
        "format": FORMAT,
        "source": str(source.path),
        "layout": layout.name,
        "conditions": list(layout.conditions),
        "family": family.name,
        "rows": tally.rows,
        "rows_dropped": dict(tally.rows_dropped.most_common()),
        "samples": len(samples),
        "samples_by_condition": dict(Counter(s["condition"] for s in samples)),
        "samples_dropped": dict(tally.samples_dropped.most_common()),
        "images_decoded": tally.images_decoded,
        "captions_kept_as_written": len(samples),
        "concepts": len(concepts),
        "paired_concepts": len(paired),
        "objects": mapping.objects.report(),
        mapping.labels.vocabulary.role: mapping.labels.report(),
    }
