"""Verbs of the protocol core: families, sample, negatives, demo (CPU only, no models)."""

from __future__ import annotations

import argparse

from autocomp.cli.table import format_table
from autocomp.config import NegativesConfig


def _families(args: argparse.Namespace) -> None:
    from autocomp.protocol.concepts import count_concepts
    from autocomp.protocol.family import load_all

    rows = []
    for family in load_all():
        distinct = ", ".join(
            f"N={n}: {count_concepts(family, n):,}" for n in range(family.n_min, family.n_max + 1)
        )
        label_role = "relations" if family.is_relation else f"{family.attribute_label}s"
        rows.append(
            [
                family.name,
                family.kind,
                f"{family.n_min}-{family.n_max}",
                str(len(family.objects)),
                f"{len(family.labels)} {label_role}",
                distinct,
            ]
        )
    headers = ["family", "kind", "N", "objects", "labels", "distinct concepts"]
    print(format_table(headers, rows))


def _sample(args: argparse.Namespace) -> None:
    from autocomp.protocol.stages import sample_stage

    table = sample_stage(args.family, args.n, args.count, args.seed, args.out, args.force)
    what = f"{table.num_rows:,} concepts of {args.family} N={args.n} (seed {args.seed})"
    print(f"wrote {what} to {args.out}")


def _negatives(args: argparse.Namespace) -> None:
    from autocomp.config import with_overrides
    from autocomp.progress import row_progress
    from autocomp.protocol.stages import negatives_stage
    from autocomp.store.tables import open_parquet

    config = with_overrides(
        NegativesConfig(),
        protocol=args.protocol,
        workers=args.workers,
        batch_size=args.batch_size,
        force=args.force or None,
    )
    total = open_parquet(args.input, "input_path").metadata.num_rows
    with row_progress("negatives", total) as advance:
        summary = negatives_stage(args.input, args.out, config, advance)
    print(
        f"wrote {summary['rows']:,} rows to {args.out} ({config.protocol} protocol): "
        f"{summary['swap']:,} swap, {summary['confusion']:,} confusion, "
        f"{summary['vary']:,} N=1 sanity negatives"
    )


def _demo(args: argparse.Namespace) -> None:
    from autocomp.cli.demo import run_demo

    run_demo(args.out, args.count, args.seed)


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the protocol verbs."""
    p = verbs.add_parser("families", help="list the task families and their vocabulary sizes")
    p.set_defaults(run=_families)

    p = verbs.add_parser("sample", help="sample concepts and write their Minimal captions")
    p.add_argument("--family", required=True, help="task family (see `autocomp families`)")
    p.add_argument("--n", type=int, required=True, help="number of objects per concept")
    p.add_argument("--count", type=int, required=True, help="number of distinct concepts")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, help="output Parquet file (concepts table)")
    p.add_argument("--force", action="store_true", help="replace an existing --out table")
    p.set_defaults(run=_sample)

    default = NegativesConfig()
    p = verbs.add_parser("negatives", help="build Swap and Confusion candidate sets")
    p.add_argument("--input", required=True, help="concepts table or curated table (Parquet)")
    p.add_argument("--out", required=True, help="output Parquet file (benchmark table)")
    p.add_argument(
        "--protocol",
        default=None,
        choices=("paper", "strict"),
        help="paper: keep candidates that describe the positive's scene (flagged); "
        f"strict: drop them (default {default.protocol})",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="worker processes, each writing its own Parquet parts (default: one per usable "
        "core, after any cgroup CPU quota; 1 runs in this process)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help=f"rows per batch (default {default.batch_size})",
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out table")
    p.set_defaults(run=_negatives)

    p = verbs.add_parser(
        "demo",
        help="the protocol-only tour: every family's candidate sets and chance baselines",
        description="The protocol core only: sample every family and N, build the Swap and "
        "Confusion sets, print their sizes and chance baselines next to the paper's. No models, "
        "so no profile (CPU, seconds). The pipelines demo (tiny profile) is `make demo`, i.e. "
        "`autocomp run --out runs/demo`.",
    )
    p.add_argument(
        "--out", default="runs/protocol-demo", help="output folder (default runs/protocol-demo)"
    )
    p.add_argument("--count", type=int, default=200, help="concepts per family and N (default 200)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(run=_demo)
