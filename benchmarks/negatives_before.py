"""The negatives stage as it was before the column-wise builder and the workers' own Parquet
parts (commit 1d80954): the baseline `negatives_throughput.py` times in the same run.

A verbatim copy of that commit's `benchmark_batch`, worker pool and write loop, and of the one
binding function changed since (`_bind_attributes`, which then searched each word twice); the
candidate sets come from `negatives.build_candidates`, which is unchanged. Not used by autocomp
itself.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.config import NegativesConfig
from autocomp.errors import UsageError
from autocomp.protocol.binding import (
    _GAP,
    BindingError,
    Template,
    _bind_relations,
    _occurrences,
    _Span,
    _template,
)
from autocomp.protocol.concepts import check_concept_row
from autocomp.protocol.family import Family, load_family
from autocomp.protocol.negatives import build_candidates, chance
from autocomp.protocol.stages import _caption_column, _worker_init, family_record
from autocomp.store.catalog.schemas import BENCHMARK_FIELDS
from autocomp.store.tables import StreamWriter, open_parquet, provenance


def bind(family: Family, objects: Sequence[str], labels: Sequence[str], text: str) -> Template:
    if family.is_relation:
        spans = _bind_relations(objects, labels, text)
    else:
        spans = _bind_attributes(objects, labels, text)
    return _template(text, spans)


def _bind_attributes(objects: Sequence[str], labels: Sequence[str], text: str) -> list[_Span]:
    spans: list[_Span] = []
    bound_attr: dict[tuple[int, int], int] = {}
    bound_noun: dict[tuple[int, int], int] = {}
    for i, (obj, attr) in enumerate(zip(objects, labels)):
        nouns = _occurrences(obj, text)
        found = 0
        for a_start, a_end in _occurrences(attr, text):
            for n_start, n_end in nouns:
                if n_start > a_end and _GAP.fullmatch(text, a_end, n_start):
                    spans.append(("object", i, a_start, n_end, a_end, n_start))
                    bound_attr[(a_start, a_end)] = i
                    bound_noun[(n_start, n_end)] = i
                    found += 1
                    break
        if not found:
            raise BindingError(
                "missing_binding",
                f"no '{attr} [word] {obj}' in the caption (attribute must precede its object "
                "with at most one word between)",
            )
    for i, (obj, attr) in enumerate(zip(objects, labels)):
        for word, bound in ((attr, bound_attr), (obj, bound_noun)):
            for span in _occurrences(word, text):
                if bound.get(span) != i:
                    raise BindingError(
                        "unbound_mention",
                        f"'{word}' at character {span[0]} is not part of a verified binding",
                    )
    return spans


def benchmark_batch(
    batch: pa.RecordBatch, caption_column: str, protocol: str, first_row: int = 0
) -> pa.RecordBatch:
    rows = batch.to_pydict()
    out: dict[str, list] = {name: [] for name, _ in BENCHMARK_FIELDS}
    families = {name: load_family(name) for name in set(rows["family"])}
    for i in range(batch.num_rows):
        family = families[rows["family"][i]]
        objects, labels, text = rows["objects"][i], rows["attributes"][i], rows[caption_column][i]
        concept = rows["concept_id"][i] if "concept_id" in rows else None
        where = f"--input row {first_row + i}" + (f" ({concept})" if concept else "")
        check_concept_row(family, {k: v[i] for k, v in rows.items()}, where, caption_column)
        try:
            template = bind(family, objects, labels, text)
            sets = build_candidates(family, objects, labels, text, protocol, template)
        except BindingError as exc:
            raise UsageError(where, text, f"the caption does not state its concept: {exc}") from exc
        out["caption"].append(sets.caption)
        out["caption_rewritten"].append(sets.caption != text)
        out["protocol"].append(protocol)
        out["swap_negatives"].append(sets.swap)
        out["swap_arrangements"].append(sets.swap_arrangements)
        out["swap_same_scene"].append(sets.swap_same_scene)
        out["swap_in_confusion"].append(sets.swap_in_confusion)
        out["confusion_negatives"].append(sets.confusion)
        out["confusion_arrangements"].append(sets.confusion_arrangements)
        out["confusion_same_scene"].append(sets.confusion_same_scene)
        out["vary_attribute_negatives"].append(sets.vary_attribute)
        out["vary_object_negatives"].append(sets.vary_object)
        for name in ("swap", "confusion", "vary_attribute", "vary_object"):
            out[f"{name}_chance"].append(chance(len(getattr(sets, name))))
    arrays = list(batch.columns) + [
        pa.array(out[name], type=type_) for name, type_ in BENCHMARK_FIELDS
    ]
    names = list(batch.schema.names) + [name for name, _ in BENCHMARK_FIELDS]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _benchmark_job(args: tuple[pa.RecordBatch, str, str, int]) -> pa.RecordBatch:
    return benchmark_batch(*args)


def _ordered_parallel(
    fn: Callable[[Any], Any], jobs: Iterator[Any], workers: int, window: int
) -> Iterator[Any]:
    if workers <= 1:
        yield from map(fn, jobs)
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_worker_init, initargs=(os.getpid(),)
    )
    pending: deque = deque()
    try:
        for job in jobs:
            pending.append(pool.submit(fn, job))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def negatives_stage(input_path: str | Path, out: str | Path, config: NegativesConfig) -> int:
    """The old stage's work (its input checks left out): returns the captions written."""
    protocol, batch_size = config.protocol, config.batch_size
    source = open_parquet(input_path)
    schema = source.schema_arrow
    caption_column = _caption_column(schema)
    if caption_column == "caption":
        schema = schema.set(
            schema.get_field_index("caption"), pa.field("source_caption", pa.string())
        )
    names = sorted({str(v) for v in source.read(columns=["family"]).column(0).unique().to_pylist()})
    families = {name: family_record(load_family(name)) for name in names}
    out_schema = pa.schema(list(schema) + [pa.field(n, t) for n, t in BENCHMARK_FIELDS])
    document = provenance(
        "benchmark", protocol=protocol, input=Path(input_path).name, families=families
    )
    workers = config.workers or 1
    text_column = "source_caption" if caption_column == "caption" else caption_column
    batches = (
        (batch.rename_columns(schema.names), text_column, protocol, i * batch_size)
        for i, batch in enumerate(source.iter_batches(batch_size=batch_size))
    )
    captions = 0
    with StreamWriter(out, out_schema, document) as writer:
        for result in _ordered_parallel(_benchmark_job, batches, workers, window=2 * workers):
            writer.write(result)
            for column in ("swap_negatives", "confusion_negatives"):
                captions += len(result.column(column).flatten())
    return captions
