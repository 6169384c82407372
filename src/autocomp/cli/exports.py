"""Verbs that carry Auto-Comp into other harnesses: export (lmms-eval, VLMEvalKit,
CLIP_benchmark) and, under `import`, VLMEvalKit's predictions read back (vlmevalkit-results)."""

from __future__ import annotations

import argparse
from typing import Any

from autocomp.config import ExportConfig
from autocomp.errors import UsageError

DEFAULTS = ExportConfig()
HARNESS_NAMES = ("lmms-eval", "vlmevalkit", "clip-benchmark")  # exports.HARNESSES' keys


def _sets(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _export(args: argparse.Namespace) -> None:
    from autocomp.exports import export

    config = ExportConfig(
        sets=_sets(args.sets),
        negatives=args.negatives,
        seed=args.seed,
        images=args.images,
        limit=args.limit,
        force=args.force,
    )
    done = export(args.harness, args.benchmark, args.out, config, store=args.store)
    wrote = done["wrote"]
    print(f"exported {wrote['questions']} questions for {args.harness} into {args.out}")
    for key, value in wrote.items():
        if key != "questions":
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            print(f"  {key.replace('_', ' ')}: {shown}")
    print(f"  record: {args.out}/autocomp_export.json")


def import_vlmevalkit_results(args: argparse.Namespace) -> None:
    """`autocomp import vlmevalkit-results`: VLMEvalKit's predictions as a score-run folder."""
    from autocomp.exports.vlmevalkit_results import import_results

    if not args.key or not args.model:
        raise UsageError(
            "key", args.key, "vlmevalkit-results needs --key (the export's "
            "AutoComp_key.parquet) and --model (the run's name)"
        )  # fmt: skip
    summary = import_results(args.source, args.key, args.out, args.model)
    print(f"imported VLMEvalKit predictions of {args.model} into {args.out}/{args.model}")
    for row in summary.to_pylist():
        print(
            f"  {row['family']} N={row['n']} {row['condition']} {row['set']} "
            f"({row['score_type']}): {row['accuracy']:.3f} of {row['items']}"
        )


RESULT_FORMATS: dict[str, Any] = {"vlmevalkit-results": import_vlmevalkit_results}


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the export verb."""
    p = verbs.add_parser(
        "export", help="write a benchmark as lmms-eval, VLMEvalKit or CLIP_benchmark files"
    )
    p.add_argument(
        "harness", metavar="HARNESS", choices=HARNESS_NAMES, help=", ".join(HARNESS_NAMES)
    )
    p.add_argument(
        "--benchmark", required=True, help="benchmark table, folder of parts, or published name"
    )
    p.add_argument("--store", default=None, help="the store a published --benchmark name is in")
    p.add_argument("--out", required=True, help="folder to write (must not exist)")
    p.add_argument("--images", default=None, help="folder the benchmark's image paths are under")
    p.add_argument(
        "--sets",
        default=",".join(DEFAULTS.sets),
        help="candidate sets to export, comma separated (default: all an item has)",
    )
    p.add_argument(
        "--negatives",
        type=int,
        default=DEFAULTS.negatives,
        help="shown negatives per question at most, a seeded draw (default: all the harness shows)",
    )
    p.add_argument("--seed", type=int, default=DEFAULTS.seed, help="seed of the draw and order")
    p.add_argument("--limit", type=int, default=DEFAULTS.limit, help="only the first N rows")
    p.add_argument("--force", action="store_true", help="replace an existing --out folder")
    p.set_defaults(run=_export)
