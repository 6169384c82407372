"""Verbs that evaluate models: models (the registry), score (models on one benchmark)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autocomp.cli.table import format_table, random_weights_note
from autocomp.config import ScoreConfig
from autocomp.errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa


def _models(args: argparse.Namespace) -> None:
    from autocomp.scoring.registry import all_models

    rows = [
        [
            m.name,
            m.backend,
            m.score,
            m.kind.weights_text(m),
            str(m.gpus),
            f"{m.gpu_memory_gb:g}",
            "yes" if m.trust_remote_code else "no",
        ]
        for m in all_models().values()
    ]
    headers = ["model", "backend", "score", "weights", "GPUs", "GPU GB", "remote code"]
    print(format_table(headers, rows))


def _score(args: argparse.Namespace) -> None:
    from autocomp.progress import row_progress
    from autocomp.scoring import score

    config = ScoreConfig(
        images=args.images,
        blind=args.blind,
        device=args.device,
        batch_size=args.batch_size,
        limit=args.limit,
        **_choice(args),
        target_width=args.target_width,
        adaptive_seed=args.adaptive_seed,
        adaptive_round=args.adaptive_round,
    )
    summary = score(args.model, args.benchmark, args.out, config, store=args.store,
                    progress=row_progress)  # fmt: skip
    _print_summary(summary)
    out = Path(args.out)
    print(
        f"paper protocol shown; every protocol in {out / 'summary.parquet'}; scores, predictions "
        f"and run.json per model in {out}/<model>/"
    )
    models = dict.fromkeys(summary.column("model").to_pylist()) if summary.num_rows else {}
    for line in random_weights_note(out / str(m) for m in models):
        print(line)


def _print_summary(summary: pa.Table) -> None:
    """One table: model x family x N x condition x set (x score type), paper protocol; the
    models in the order scored."""
    rows = [r for r in summary.to_pylist() if r["protocol"] == "paper"]
    rank = {name: i for i, name in enumerate(dict.fromkeys(r["model"] for r in rows))}
    types = {"score": 0, "per_token": 1, "choice": 2}
    rows.sort(key=lambda r: (rank.get(r["model"], len(rank)), r["family"], r["n"],
                             r["condition"], r["set"], types.get(r["score_type"], 3)))  # fmt: skip
    table = [
        [
            r["model"],
            r["family"],
            str(r["n"]),
            r["condition"],
            r["set"],
            r["score_type"],
            str(r["items"]),
            f"{100 * r['accuracy']:.1f}",
            f"{100 * r['chance']:.2f}",
            str(r["failed"]),
        ]
        for r in rows
    ]
    headers = ["model", "family", "N", "condition", "set", "score", "items", "acc %", "chance %",
               "failed"]  # fmt: skip
    print(format_table(headers, table))


def _choice(args: argparse.Namespace) -> dict[str, Any]:
    """The --blind choice settings given (each only with --blind choice)."""
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
    defaults = ScoreConfig()
    p = verbs.add_parser("models", help="list the registered models with backend and resources")
    p.set_defaults(run=_models)

    p = verbs.add_parser(
        "score",
        help="score models on one benchmark (each into <out>/<model>/)",
        description="Score models on one benchmark, one after another, each into "
        "<out>/<model>/. No profile: models are named with --model (a tiny-* model for random "
        "weights on a CPU); registered ones take their settings from the model registry, "
        "ad-hoc ones (open_clip:, hf:) from open_clip's tables or the model's own config.",
    )
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
    p.add_argument(
        "--limit", type=int, default=None, help="score only the first N items (in table order)"
    )
    p.add_argument(
        "--target-width",
        type=float,
        default=None,
        metavar="PP",
        help="adaptive: score each family x N x condition cell in a seeded random order until "
        "every accuracy's anytime-valid 95%% interval is narrower than PP percentage points "
        "(<out>/<model>/adaptive.parquet says per cell what was scored and saved)",
    )
    p.add_argument(
        "--adaptive-seed",
        type=int,
        default=defaults.adaptive_seed,
        help=f"--target-width: seed of the scoring order (default {defaults.adaptive_seed}); "
        "extend a run with the same seed",
    )
    p.add_argument(
        "--adaptive-round",
        type=int,
        default=defaults.adaptive_round,
        help=f"--target-width: items of each open cell between two checks "
        f"(default {defaults.adaptive_round})",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=defaults.batch_size,
        help="candidate texts per forward pass (default: the backend's own)",
    )
    p.set_defaults(run=_score)
