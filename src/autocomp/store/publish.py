"""Publish a benchmark to a store as a Hugging Face-readable dataset; fetch it back.

A published benchmark is a folder:

    data/test-IIIII-of-KKKKK.parquet  the benchmark rows with the image embedded ({bytes, path},
                                      the `datasets` Image layout; its features are in the
                                      Parquet metadata, so `datasets.load_dataset("parquet",
                                      data_files=...)` gives PIL images); ROWS_PER_SHARD rows
                                      per part, in row groups of ROWS_PER_GROUP
    concepts.parquet                  the concept set (a later run can reuse it: same concepts,
                                      new generator, comparable concept by concept)
    survival.parquet                  the validation survival table (paper Table 3)
    README.md                         the dataset card: what, sizes, survival, provenance

and is put in the store under `benchmarks/<name>`, manifest last (autocomp.store.storage),
each part uploaded as soon as it is written: the pipeline's publish step reads the benchmark
table and its images from the store and writes the parts back to it, holding a few parts on disk
and a few row groups in memory whatever the benchmark's size.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp import __version__
from autocomp.errors import UsageError
from autocomp.store.atomic import atomic_path, scratch_folder
from autocomp.store.catalog.benchmarks import Benchmark, RemotePart, as_benchmark
from autocomp.store.catalog.published import (  # noqa: F401  (their names, kept importable here)
    check_published,
    fetch_published,
    published_names,
)
from autocomp.store.catalog.schemas import IMAGE_TYPE
from autocomp.store.images import ImageFolder, Images
from autocomp.store.paths import OutsideRoot
from autocomp.store.stores import open_store
from autocomp.store.transfer import read_ahead

ROWS_PER_SHARD = 200
ROWS_PER_GROUP = 16  # rows per row group: what a reader streaming from a store holds at once
UPLOADS = 2  # parts uploaded at once by publish (each part: ROWS_PER_SHARD images)


def _feature(type_: pa.DataType) -> dict[str, Any]:
    if pa.types.is_list(type_):
        return {"feature": _feature(type_.value_type), "_type": "Sequence"}
    if type_ == IMAGE_TYPE:
        return {"_type": "Image"}
    names = {
        pa.string(): "string",
        pa.bool_(): "bool",
        pa.int8(): "int8",
        pa.int32(): "int32",
        pa.int64(): "int64",
        pa.float64(): "float64",
        pa.binary(): "binary",
    }
    return {"dtype": names[type_], "_type": "Value"}


def hf_schema(schema: pa.Schema) -> pa.Schema:
    """The schema with `datasets` features metadata (so the image column loads as an Image)."""
    features = {f.name: _feature(f.type) for f in schema}
    info = {"info": {"features": features}}
    return schema.with_metadata(
        {**(schema.metadata or {}), b"huggingface": json.dumps(info).encode()}
    )


def shard_count(rows: int) -> int:
    """How many data/test-*.parquet parts a benchmark of `rows` rows is written as."""
    return max(1, -(-rows // ROWS_PER_SHARD))


def write_part(table: pa.Table, out: str | Path, index: int, shards: int) -> Path:
    """Write one part, data/test-IIIII-of-KKKKK.parquet under `out`, with the `datasets`
    features beside the table's own metadata (its autocomp provenance stays); return its path."""
    path = Path(out) / "data" / f"test-{index:05d}-of-{shards:05d}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table.replace_schema_metadata(hf_schema(table.schema).metadata), path, compression="zstd"
    )
    return path


def _embed(table: pa.Table, images: Images) -> pa.Table:
    """`table` with its image column holding each image's bytes ({bytes, path}); a folder's
    references resolve inside it, a store's images are fetched in parallel."""
    refs = table.column("image").to_pylist()
    if isinstance(images, ImageFolder):
        values = []
        for ref in refs:
            try:
                values.append({"bytes": images.path(ref).read_bytes(), "path": ref})
            except OutsideRoot as exc:
                raise UsageError("images", ref, f"refused: {exc}; fix the table") from None
            except OSError as exc:
                raise UsageError("images", ref, f"cannot be read ({exc.strerror})") from exc
    else:
        try:
            data = images.read_many(refs)  # type: ignore[attr-defined]
        except OutsideRoot as exc:
            raise UsageError("images", str(exc), "refused; fix the table") from None
        values = [{"bytes": b, "path": ref} for b, ref in zip(data, refs)]
    index = table.schema.get_field_index("image")
    return table.set_column(index, pa.field("image", IMAGE_TYPE), pa.array(values, IMAGE_TYPE))


def _groups(batches: Iterator[pa.RecordBatch], shard_rows: int, group_rows: int) -> Iterator:
    """(shard number, table of at most `group_rows` rows) for every row in order, a new shard
    every `shard_rows` rows (a group never crosses a shard's end)."""
    pending: list[pa.RecordBatch] = []
    held, shard, in_shard = 0, 0, 0
    for batch in batches:
        pending.append(batch)
        held += batch.num_rows
        while held >= min(group_rows, shard_rows - in_shard):
            take = min(group_rows, shard_rows - in_shard)
            table = pa.Table.from_batches(pending).combine_chunks()
            yield shard, table.slice(0, take)
            rest = table.slice(take)
            pending, held = (rest.to_batches() if rest.num_rows else []), rest.num_rows
            in_shard += take
            if in_shard == shard_rows:
                shard, in_shard = shard + 1, 0
    if held:
        yield shard, pa.Table.from_batches(pending).combine_chunks()


GENERATED = (
    "Generated by autocomp (the Auto-Comp protocol): Minimal and Contextual captions, images, "
    "validation, and exact Swap / Confusion hard negatives."
)


def dataset_card(
    name: str,
    benchmark: pa.Table,
    survival: pa.Table | None,
    meta: dict,
    about: str = GENERATED,
    generated_by: dict[str, dict[str, str]] | None = None,
) -> str:
    """The README.md of a benchmark folder: what (`about`), the models that made it
    (`generated_by`: role -> {model, weights}; random weights said first), sizes, survival,
    provenance."""
    rows = benchmark.select(["family", "n", "condition"]).to_pylist()
    counts: dict[tuple, int] = {}
    for r in rows:
        key = (r["family"], r["n"], r["condition"])
        counts[key] = counts.get(key, 0) + 1
    lines = [
        "---",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: test",
        "    path: data/test-*.parquet",
        "tags: [autocomp, compositionality, vision-language]",
        "---",
        f"# autocomp benchmark `{name}`",
        "",
        f'{about} Load with `datasets.load_dataset("parquet", data_files="data/test-*.parquet")`.',
        "",
        *_generated_lines(generated_by or {}),
        "| family | N | condition | samples |",
        "| --- | --- | --- | --- |",
        *(f"| {f} | {n} | {c} | {k} |" for (f, n, c), k in sorted(counts.items())),
    ]
    if survival is not None and survival.num_rows:
        lines += [
            "",
            "## Validation survival",
            "",
            "| family | N | condition | check | entered | passed | survival |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {r['family']} | {r['n']} | {r['condition']} | {r['check']} | {r['entered']} | "
            f"{r['passed']} | {100 * r['survival']:.1f} % |"
            for r in survival.to_pylist()
        ]
    lines += [
        "",
        "## Provenance",
        "",
        f"autocomp {__version__}. Protocol: {meta.get('protocol', 'paper')}.",
        "",
        "```json",
        json.dumps(meta, indent=1, sort_keys=True, default=str)[:20000],
        "```",
        "",
    ]
    return "\n".join(lines)


def _generated_lines(generated_by: dict[str, dict[str, str]]) -> list[str]:
    """The card's "Generated with" section: each role's model, and first, when any has random
    weights, that the captions and images came from untrained models."""
    if not generated_by:
        return []
    random = [
        f"{role} {m['model']}" for role, m in generated_by.items() if m["weights"] == "random"
    ]
    lines = ["## Generated with", ""]
    if random:
        lines += [
            f"**Untrained models: {', '.join(random)} have random weights** (tiny models built "
            "from their configs). The captions, images and validation verdicts of this "
            "benchmark came from them: it exercises the pipeline and measures nothing about "
            "real models.",
            "",
        ]
    lines += ["| role | model | weights |", "| --- | --- | --- |"]
    lines += [f"| {role} | {m['model']} | {m['weights']} |" for role, m in generated_by.items()]
    return [*lines, ""]


def _raw_metadata(source: Benchmark) -> dict[bytes, bytes]:
    """The first part's schema metadata as written (its autocomp provenance, byte for byte)."""
    first = source.files[0]
    opened = first.open() if isinstance(first, RemotePart) else pq.ParquetFile(first)
    return dict(opened.schema_arrow.metadata or {})


def stream_dataset(
    benchmark: str | Path | Benchmark,
    images: str | Path | Images,
    work: str | Path,
    name: str,
    add: Callable[[str, Path], None],
    concepts: str | Path | None = None,
    survival: str | Path | None = None,
    generated_by: dict[str, dict[str, str]] | None = None,
) -> int:
    """Make the publishable files (see the module doc) one at a time in `work` and hand each
    to `add(relative path, file)` as soon as it is complete (a folder move, or a store upload
    that removes the file once sent). The benchmark is read ROWS_PER_GROUP rows at a time (also
    from a store), the images of the next group fetched while a group is written, so memory
    and disk hold a few groups and a few parts whatever the benchmark's size. Returns the rows
    written."""
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    source = as_benchmark(benchmark)
    if "image" not in source.schema.names:
        raise UsageError(
            "benchmark",
            str(source.path),
            "has no image column; build it from a curated table (autocomp curate)",
        )
    images = ImageFolder(images) if isinstance(images, str | Path) else images
    meta = source.metadata
    shards = shard_count(source.rows)
    schema = source.schema.with_metadata(_raw_metadata(source))
    image_at = schema.get_field_index("image")
    schema = hf_schema(schema.set(image_at, pa.field("image", IMAGE_TYPE)))
    groups = _groups(source.batches(batch_size=ROWS_PER_GROUP), ROWS_PER_SHARD, ROWS_PER_GROUP)
    embedded = read_ahead(((i, _embed(t, images)) for i, t in groups), depth=2)
    writer, current, path = None, -1, work
    written = 0
    for shard, table in embedded:
        if shard != current:
            if writer is not None:
                writer.close()
                add(_part_name(current, shards), path)
            current = shard
            path = work / f"part-{shard:05d}.parquet"
            writer = pq.ParquetWriter(path, schema, compression="zstd")
        writer.write_table(table.replace_schema_metadata(schema.metadata))  # type: ignore[union-attr]
        written += table.num_rows
    if writer is None:  # no rows: one empty part, as one writer writes it
        current, path = 0, work / "part-00000.parquet"
        pq.write_table(schema.empty_table(), path, compression="zstd")
    else:
        writer.close()
    add(_part_name(current, shards), path)
    survival_table = pq.read_table(survival) if survival else None
    if concepts:
        pq.write_table(pq.read_table(concepts), work / "concepts.parquet", compression="zstd")
        add("concepts.parquet", work / "concepts.parquet")
    if survival_table is not None:
        pq.write_table(survival_table, work / "survival.parquet", compression="zstd")
        add("survival.parquet", work / "survival.parquet")
    counted = source.read(["family", "n", "condition"])
    card = dataset_card(name, counted, survival_table, meta, generated_by=generated_by)
    (work / "README.md").write_text(card)
    add("README.md", work / "README.md")
    return written


def _part_name(index: int, shards: int) -> str:
    return f"data/test-{index:05d}-of-{shards:05d}.parquet"


def build_dataset(
    benchmark: str | Path,
    images_root: str | Path | Images,
    out: str | Path,
    name: str,
    concepts: str | Path | None = None,
    survival: str | Path | None = None,
) -> Path:
    """Write the publishable folder (see the module doc); return it."""
    out = Path(out)
    (out / "data").mkdir(parents=True, exist_ok=True)

    def move(rel: str, path: Path) -> None:
        if path != out / rel:
            os.replace(path, out / rel)

    with scratch_folder(out / "build") as work:
        stream_dataset(benchmark, images_root, work, name, move, concepts, survival)
    return out


def publish_stage(
    benchmark: str | Path | Benchmark,
    images_root: str | Path | Images,
    work: str | Path,
    store_uri: str,
    name: str,
    concepts: str | Path | None = None,
    survival: str | Path | None = None,
    generated_by: dict[str, dict[str, str]] | None = None,
) -> str:
    """Put the dataset in the store as benchmarks/<name> as it is made (each part uploaded once
    written and removed from `work`, UPLOADS at a time; manifest last); return its URI. The
    benchmark and its images may be in the store themselves (store to store: the pipeline's
    publish step). A benchmark already published under that name is left as it is (resume); an
    interrupted publish sends again only the parts the store does not hold.

    Args:
        benchmark: the benchmark table, folder of parts, or an opened Benchmark.
        images_root: where the benchmark's image paths are (a folder or the store's Images).
        work: a local scratch folder for the parts being written.
        store_uri: the store (`file://...`, `s3://...`).
        name: the benchmark's name under benchmarks/.
        concepts: the run's concepts table, published beside it (Tables 4, 16).
        survival: the run's survival table, published beside it (Table 3).
        generated_by: role -> {model, weights} of the models that made it, for the card.

    Returns:
        The URI of benchmarks/<name> in the store.
    """
    store = open_store(store_uri)
    key = f"benchmarks/{name}"
    if store.manifest(key) is None:
        source = as_benchmark(benchmark)
        made_by = {"stage": "publish", "benchmark": source.metadata, "rows": source.rows}
        with store.writer(key, made_by, workers=UPLOADS) as writer:  # type: ignore[call-arg]
            add = functools.partial(writer.add_file, remove=True)
            stream_dataset(source, images_root, work, name, add, concepts, survival,
                           generated_by)  # fmt: skip
    return f"{store.uri}/{key}"


def copy_rows(
    source: Benchmark,
    keep: Callable[[pa.RecordBatch], pa.Array],
    store_uri: str,
    name: str,
    work: str | Path,
    document: dict[str, Any],
) -> int:
    """The rows of `source` that `keep(batch)` (a boolean array) selects, put in the store as
    the output `name` (data/part-IIIII.parquet, ROWS_PER_SHARD rows each in row groups of
    ROWS_PER_GROUP, with `document` as their provenance and the `datasets` features), part by
    part as they fill: a benchmark subset (fine-tuning's evaluation benchmark) moved store to
    store with a few parts on disk. Returns the rows kept."""
    from autocomp.store.tables import with_metadata

    store = open_store(store_uri)
    if store.manifest(name) is not None:
        return int(store.manifest(name)["made_by"].get("rows", 0))  # type: ignore[index]
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    schema = hf_schema(with_metadata(source.schema.remove_metadata(), document))
    chosen = (b.filter(keep(b)) for b in source.batches(batch_size=ROWS_PER_GROUP))
    kept = 0
    current, writer, path = -1, None, work
    with store.writer(name, {"stage": "subset", "rows": None}, workers=UPLOADS) as out:  # type: ignore[call-arg]
        for shard, table in _groups((b for b in chosen if b.num_rows), ROWS_PER_SHARD,
                                    ROWS_PER_GROUP):  # fmt: skip
            if shard != current:
                if writer is not None:
                    writer.close()
                    out.add_file(f"data/part-{current:05d}.parquet", path, remove=True)
                current, path = shard, work / f"part-{shard:05d}.parquet"
                writer = pq.ParquetWriter(path, schema, compression="zstd")
            writer.write_table(table.replace_schema_metadata(schema.metadata))  # type: ignore[union-attr]
            kept += table.num_rows
        if writer is None:
            current, path = 0, work / "part-00000.parquet"
            pq.write_table(schema.empty_table(), path, compression="zstd")
        else:
            writer.close()
        out.add_file(f"data/part-{current:05d}.parquet", path, remove=True)
        out.made_by["rows"] = kept
    return kept


def fetch_benchmark(store_uri: str, name: str, work: str | Path, out: str | Path) -> Path:
    """Fetch benchmarks/<name> from the store and write its rows as one benchmark table
    (atomically: a killed fetch leaves no partial table under `out`)."""
    from autocomp.store.catalog.benchmarks import open_benchmark

    found = open_benchmark(fetch_published(store_uri, name, work))
    schema = pq.read_schema(found.files[0])  # the first part's metadata: provenance, features
    with atomic_path(out) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for batch in found.batches(batch_size=64):
            writer.write_batch(batch)
    return Path(out)
