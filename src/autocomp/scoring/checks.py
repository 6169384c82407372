"""What the score stage checks before any model loads: the configuration, the mode against each
model, the benchmark against the mode, the output folder. Each check raises a UsageError naming
the input, the value and the fix."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from autocomp.config import ScoreConfig
from autocomp.errors import UsageError
from autocomp.scoring.items import REQUIRED
from autocomp.scoring.ranges import parse_range
from autocomp.scoring.registry import ModelEntry
from autocomp.store.catalog.benchmarks import Benchmark
from autocomp.store.catalog.ids import with_sample_keys
from autocomp.store.outputs import check_output
from autocomp.store.tables import require_columns

BLIND_MODES = ("likelihood", "choice")


def check_config(config: ScoreConfig) -> None:
    """The mode and the numeric options are valid."""
    if config.limit is not None and config.limit < 1:
        raise UsageError("limit", config.limit, "must be at least 1 (items to score)")
    if config.batch_size is not None and config.batch_size < 1:
        raise UsageError("batch_size", config.batch_size, "must be at least 1 (texts per forward)")
    if config.max_candidates < 1:
        raise UsageError("max_candidates", config.max_candidates, "must be at least 1")
    if config.blind and config.blind not in BLIND_MODES:
        raise UsageError("blind", config.blind, f"must be one of {', '.join(BLIND_MODES)}")
    if config.blind == "choice" and config.choice_negatives < 1:
        raise UsageError(
            "choice_negatives", str(config.choice_negatives), "must be 1 or more (paper: 49)"
        )
    if config.blind == "choice" and config.choice_seed < 0:
        raise UsageError("choice_seed", str(config.choice_seed), "must be 0 or more")
    parse_range(config.part_range)


def check_images(config: ScoreConfig) -> None:
    """The images folder, if given, is a folder."""
    if config.images is not None and not Path(config.images).is_dir():
        raise UsageError("images", config.images, "is not a folder; give the images folder")


def check_mode(entry: ModelEntry, config: ScoreConfig) -> None:
    """The model's backend can run in the requested mode (blind: one that scores captions
    without an image; with images: one that scores them with one)."""
    if config.blind and not entry.kind.blind:
        raise UsageError(
            "blind", entry.name, "scores captions without images with generative models only"
        )
    if not config.blind and not entry.kind.images:
        raise UsageError(
            "blind", entry.name, f"its backend {entry.backend} scores captions without images "
            "only; pass --blind likelihood or --blind choice",
        )  # fmt: skip


def check_prompts(entry: ModelEntry, source: Benchmark) -> None:
    """A benchmark whose rows ask questions (a VQA benchmark: NaturalBench) is scored only by a
    backend that follows a per-request instruction (the transformers VLMs); any other would
    score the answer options against the image without the question."""
    if entry.kind.prompts or "prompt" not in source.schema.names:
        return
    if not pc.count(source.read(["prompt"], verify=False)["prompt"]).as_py():  # a glance
        return
    raise UsageError(
        "models", entry.name, f"cannot answer {source.path}'s questions (a VQA benchmark: each "
        f"row asks one); its backend {entry.backend} scores captions only: score it with a "
        "generative VLM (backend transformers_vlm)",
    )  # fmt: skip


def check_text_rows(entry: ModelEntry, source: Benchmark) -> None:
    """A benchmark of text-only rows (SugarCrepe++'s TOT: texts scored against a text) is
    scored only by a backend with a text embedding (`ScoringBackend.text_similarity`)."""
    if entry.kind.text_similarity or "query_text" not in source.schema.names:
        return
    if not pc.count(source.read(["query_text"], verify=False)["query_text"]).as_py():
        return
    raise UsageError(
        "models", entry.name, f"cannot score {source.path}'s text-only rows (text against "
        f"text); its backend {entry.backend} has no text embedding: score them with an "
        "open_clip model",
    )  # fmt: skip


def check_out(out: Path) -> None:
    """The output folder can hold model folders."""
    if out.exists() and not out.is_dir():
        raise UsageError("out", str(out), "is a file; give a folder for the run")
    check_output(out)
    if (out / "run.json").is_file():
        raise UsageError(
            "out",
            str(out),
            "holds a one-model run of an earlier autocomp (run.json at its top); each model now "
            "has its folder <out>/<model>/: move the run's files into it to resume, or give a "
            "new --out",
        )


def check_benchmark(source: Benchmark, config: ScoreConfig) -> None:
    """The benchmark table fits the mode (image paths need an images folder: check_images
    checks that it is one); once per call of the stage, at its edge (the catalog checked the
    parts when it opened them)."""
    benchmark, schema = source.path, source.schema
    hint = "give a benchmark table (autocomp negatives)"
    require_columns(benchmark, schema, REQUIRED, hint, option="benchmark")
    harness = source.metadata.get("harness")  # importers/harness.py: groups of images x texts
    if harness and config.blind:
        raise UsageError(
            "blind", config.blind, f"{benchmark} is the harness benchmark {harness}, whose rule "
            "compares each text's scores across a group's images: a score without the image "
            "gives every image the same; score it without --blind"
        )  # fmt: skip
    if not config.blind:
        if "image" not in schema.names:
            raise UsageError(
                "benchmark", str(benchmark), "has no image column; pass --blind to score "
                "captions alone (generative models)",
            )  # fmt: skip
        if config.images is None and pa.types.is_string(schema.field("image").type):
            raise UsageError(
                "images", None, f"{benchmark} names its images by path: give their folder"
            )
    keys = [c for c in ("sample_id", "concept_id", "condition") if c in schema.names]
    ids = with_sample_keys(source.read(keys, verify=False))["sample_id"]  # a glance: each pod
    counts = pc.value_counts(ids)
    repeated = [c["values"] for c in counts.to_pylist() if c["counts"] > 1]
    if repeated:
        raise UsageError(
            "benchmark",
            str(benchmark),
            f"has duplicate sample_id {repeated[0]!r} ({len(repeated)} duplicated); each item "
            "must be listed once",
        )
