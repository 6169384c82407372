"""Auto-Comp out to the harnesses researchers already run: lmms-eval (a task pack), VLMEvalKit
(custom MCQ TSVs, and its predictions read back: vlmevalkit_results.py) and CLIP_benchmark
(annotation files for its image_caption_selection metric). Each harness is a row of HARNESSES
(its writer and how many options it can show); `export` is the one entry: the benchmark read
once (questions.py), the folder written whole or not at all, with the record of what was
exported (config, seed, version, the benchmark's digest)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocomp.config import ExportConfig, ScoreConfig
from autocomp.errors import UsageError
from autocomp.exports import clip_benchmark, lmms_eval, vlmevalkit
from autocomp.exports.questions import building, check_out, questions, record, write_record
from autocomp.scoring.checks import check_benchmark
from autocomp.store.catalog.benchmarks import Benchmark, Published, locate, open_published

Writer = Callable[[list, Path, Path, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Harness:
    """One harness an export writes for: its writer (questions, temporary folder, final folder,
    record) -> what it wrote; `max_options`: how many options it shows (None: any)."""

    title: str
    write: Writer
    max_options: int | None = None


HARNESSES: dict[str, Harness] = {
    "lmms-eval": Harness("lmms-eval task pack (--include_path)", lmms_eval.write),
    "vlmevalkit": Harness(
        "VLMEvalKit custom MCQ TSVs ($LMUData)", vlmevalkit.write, len(vlmevalkit.LETTERS)
    ),
    "clip-benchmark": Harness("CLIP_benchmark image_caption_selection files", clip_benchmark.write),
}


def export(
    harness: str,
    benchmark: str | Path | Benchmark,
    out: str | Path,
    config: ExportConfig | None = None,
    store: str | None = None,
) -> dict[str, Any]:
    """Write `benchmark` (a table, folder of parts or published name with `store`) as
    `harness`'s files in the new folder `out`; return the export's record."""
    config = config or ExportConfig()
    if harness not in HARNESSES:
        raise UsageError("harness", harness, f"is not one of {', '.join(HARNESSES)}")
    spec = HARNESSES[harness]
    final = check_out(out, config.force)
    found = locate(benchmark, store)  # a published name is streamed from its store, not copied
    source = open_published(found.store, found.name) if isinstance(found, Published) else found
    check_benchmark(source, ScoreConfig(images=config.images))  # score's checks: columns, images
    items = list(questions(source, config, spec.max_options))
    if not items:
        raise UsageError(
            "benchmark",
            source.shown,
            "gives no questions: it has no rows, or none has the sets asked for",
        )
    document = record(harness, source, config, {})
    with building(final, config.force) as tmp:
        written = spec.write(items, tmp, final, document)
        document = {**document, "wrote": written}
        write_record(tmp, document)
    return document
