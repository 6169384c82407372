"""Verbs that evaluate models: models (the registry), score (models on one benchmark)."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from autocomp.cli.table import format_table
from autocomp.config import ScoreConfig
from autocomp.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

    from autocomp.scoring.benchmark import Benchmark
    from autocomp.scoring.registry import ModelEntry


def _models(args: argparse.Namespace) -> None:
    from autocomp.scoring.registry import all_models

    rows = [
        [
            m.name,
            m.backend,
            m.score,
            m.weights if m.backend != "open_clip" else f"{m.architecture} / {m.weights}",
            str(m.gpus),
            f"{m.gpu_memory_gb:g}",
            "yes" if m.trust_remote_code else "no",
        ]
        for m in all_models().values()
    ]
    headers = ["model", "backend", "score", "weights", "GPUs", "GPU GB", "remote code"]
    print(format_table(headers, rows))


def _check_out(out: Path) -> None:
    """The output folder can hold model folders (checked before anything is loaded)."""
    if out.exists() and not out.is_dir():
        raise UsageError("--out", str(out), "is a file; give a folder for the run")
    if not out.parent.is_dir():
        raise UsageError("--out", str(out), f"folder {out.parent} does not exist")
    if (out / "run.json").is_file():
        raise UsageError(
            "--out",
            str(out),
            "holds a one-model run of an earlier autocomp (run.json at its top); each model now "
            "has its folder <out>/<model>/: move the run's files into it to resume, or give a "
            "new --out",
        )


def _score(args: argparse.Namespace) -> None:
    from autocomp.devices import check_device
    from autocomp.scoring.benchmark import check_source, resolve_benchmark
    from autocomp.scoring.specs import parse_specs, resolve_spec
    from autocomp.scoring.stage import check_benchmark, check_config, check_mode

    config = ScoreConfig(
        images=args.images,
        blind=args.blind,
        device=args.device,
        batch_size=args.batch_size,
        limit=args.limit,
    )
    check_config(config)
    specs = parse_specs(args.model)  # every value's syntax and registered names: fast
    out = Path(args.out)
    _check_out(out)
    check_source(args.benchmark, args.store)
    if config.images is not None and not Path(config.images).is_dir():
        raise UsageError("--images", config.images, "is not a folder; give the images folder")
    entries = [resolve_spec(spec) for spec in specs]  # every model, before any is loaded
    for entry in entries:
        check_mode(entry, config)
    check_device(config.device)
    created = not out.exists()
    try:
        out.mkdir(exist_ok=True)
        benchmark = resolve_benchmark(args.benchmark, args.store, out)
        check_benchmark(benchmark, config)
        summary = _score_all(entries, benchmark, out, config)
    except BaseException:
        if created and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # a call that failed before its first result leaves nothing
        raise
    _print_summary(summary, [e.name for e in entries])
    print(
        f"paper protocol shown; both protocols in {out / 'summary.parquet'}; scores, predictions "
        f"and run.json per model in {out}/<model>/"
    )


def _score_all(
    entries: list[ModelEntry], benchmark: Benchmark, out: Path, config: ScoreConfig
) -> pa.Table:
    """Score each model into <out>/<model>/, one after another; write the combined summary."""
    from autocomp.progress import row_progress
    from autocomp.scoring import load_scorer
    from autocomp.scoring.stage import collect_runs, score_stage

    total = min(config.limit or benchmark.rows, benchmark.rows)
    for i, entry in enumerate(entries, 1):
        label = f"score {entry.name}" + (f" ({i}/{len(entries)})" if len(entries) > 1 else "")
        factory = functools.partial(load_scorer, entry, config.device, config.batch_size)
        with row_progress(label, total) as advance:
            score_stage(entry, benchmark, out / entry.name, factory, config, progress=advance)
    return collect_runs([out / e.name for e in entries], out)


def _print_summary(summary: pa.Table, order: list[str]) -> None:
    """One table: model x family x N x condition x set, paper protocol."""
    rank = {name: i for i, name in enumerate(order)}
    rows = [r for r in summary.to_pylist() if r["protocol"] == "paper"]
    rows.sort(key=lambda r: (rank.get(r["model"], len(rank)), r["family"], r["n"],
                             r["condition"], r["set"]))  # fmt: skip
    table = [
        [
            r["model"],
            r["family"],
            str(r["n"]),
            r["condition"],
            r["set"],
            str(r["items"]),
            f"{100 * r['accuracy']:.1f}",
            f"{100 * r['chance']:.2f}",
            str(r["failed"]),
        ]
        for r in rows
    ]
    headers = ["model", "family", "N", "condition", "set", "items", "acc %", "chance %", "failed"]
    print(format_table(headers, table))


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the scoring verbs."""
    p = verbs.add_parser("models", help="list the registered models with backend and resources")
    p.set_defaults(run=_models)

    p = verbs.add_parser("score", help="score models on one benchmark (each into <out>/<model>/)")
    p.add_argument(
        "--model",
        action="append",
        required=True,
        help="repeatable or comma list: a registered name (`autocomp models`), "
        "open_clip:ARCH:PRETRAINED (a tag of open_clip.list_pretrained() or file:/path), "
        "open_clip:hf-hub:ORG/NAME, or hf:ORG/NAME / hf:/path (backend from its config)",
    )
    p.add_argument(
        "--benchmark",
        required=True,
        help="a benchmark table, a folder of Parquet parts (data/*.parquet as published, or "
        "*.parquet), or with --store a published name",
    )
    p.add_argument("--store", default=None, help="store of a published --benchmark name")
    p.add_argument("--out", required=True, help="output folder: <out>/<model>/ each (resumable)")
    p.add_argument("--images", default=None, help="folder the benchmark's image paths are under")
    p.add_argument("--device", default=None, help="torch device (default: cuda if present)")
    p.add_argument("--blind", action="store_true", help="score captions without the image")
    p.add_argument(
        "--limit", type=int, default=None, help="score only the first N items (in table order)"
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=ScoreConfig.batch_size,
        help="candidate texts per forward pass (default: the backend's own)",
    )
    p.set_defaults(run=_score)
