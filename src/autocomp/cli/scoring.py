"""Verbs that evaluate models: models (the registry), score (one model on one benchmark)."""

from __future__ import annotations

import argparse

from autocomp.cli.table import format_table


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


def _score(args: argparse.Namespace) -> None:
    from autocomp.config import ScoreConfig
    from autocomp.progress import row_progress
    from autocomp.scoring import load_scorer
    from autocomp.scoring.registry import get_model
    from autocomp.scoring.stage import score_stage
    from autocomp.store.tables import open_parquet

    entry = get_model(args.model)
    config = ScoreConfig(images=args.images, blind=args.blind, device=args.device, **_choice(args))
    total = open_parquet(args.benchmark, "--benchmark").metadata.num_rows
    with row_progress(f"score {entry.name}", total) as advance:
        summary = score_stage(
            entry,
            args.benchmark,
            args.out,
            lambda: load_scorer(entry.name, device=config.device),
            config,
            progress=advance,
        )
    rows = [
        [
            r["family"],
            str(r["n"]),
            r["condition"],
            r["set"],
            r["protocol"],
            r["score_type"],
            str(r["items"]),
            f"{100 * r['accuracy']:.1f}",
            f"{100 * r['chance']:.2f}",
            str(r["failed"]),
            str(r["ties"]),
        ]
        for r in summary.to_pylist()
    ]
    headers = [
        "family",
        "N",
        "condition",
        "set",
        "protocol",
        "score",
        "items",
        "acc %",
        "chance %",
        "failed",
        "ties",
    ]
    print(format_table(headers, rows))
    print(f"scores, predictions and summary in {args.out}")


def _choice(args: argparse.Namespace) -> dict[str, int]:
    """The --blind choice settings given (each only with --blind choice)."""
    from autocomp.errors import UsageError

    given = {
        "choice_negatives": (args.choice_negatives, "--choice-negatives"),
        "choice_seed": (args.choice_seed, "--choice-seed"),
    }
    settings = {}
    for key, (value, flag) in given.items():
        if value is None:
            continue
        if args.blind != "choice":
            raise UsageError(flag, str(value), "applies to --blind choice only; drop it")
        settings[key] = value
    return settings


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the scoring verbs."""
    from autocomp.config import ScoreConfig

    defaults = ScoreConfig()
    p = verbs.add_parser("models", help="list the registered models with backend and resources")
    p.set_defaults(run=_models)

    p = verbs.add_parser(
        "score",
        help="score one model on one benchmark table",
        description="Score one registered model on one benchmark. No profile: the model is "
        "named with --model (a tiny-* model for random weights on a CPU) and its settings "
        "come from the model registry.",
    )
    p.add_argument("--model", required=True, help="registered model name (see `autocomp models`)")
    p.add_argument("--benchmark", required=True, help="benchmark table (autocomp negatives)")
    p.add_argument("--out", required=True, help="output folder (resumable)")
    p.add_argument("--images", default=None, help="folder the benchmark's image paths are under")
    p.add_argument("--device", default=None, help="torch device (default: cuda if present)")
    p.add_argument(
        "--blind",
        nargs="?",
        const="likelihood",
        default="",
        metavar="MODE",
        help="without the image (paper A.8, generative models): `likelihood` (the default "
        "MODE) scores each caption alone; `choice` asks the model to pick the positive among "
        "shuffled, numbered options",
    )
    p.add_argument(
        "--choice-negatives",
        type=int,
        default=None,
        help=f"--blind choice: negatives shown per question, a seeded subsample where a set has "
        f"more (default {defaults.choice_negatives}, the paper's)",
    )
    p.add_argument(
        "--choice-seed",
        type=int,
        default=None,
        help=f"--blind choice: seed of the subsample and order of the options "
        f"(default {defaults.choice_seed})",
    )
    p.set_defaults(run=_score)
