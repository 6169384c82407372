"""The `autocomp` command line: one entry point, one verb per stage, `--help` on every verb.

Bad input exits with code 2 and one line that names the input, the value and the fix.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from autocomp import __version__
from autocomp.errors import UsageError


def _families(args: argparse.Namespace) -> None:
    from autocomp.concepts import count_concepts
    from autocomp.family import load_all

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
    from autocomp.stages import sample_stage

    table = sample_stage(args.family, args.n, args.count, args.seed, args.out)
    what = f"{table.num_rows:,} concepts of {args.family} N={args.n} (seed {args.seed})"
    print(f"wrote {what} to {args.out}")


def _negatives(args: argparse.Namespace) -> None:
    from autocomp.progress import row_progress
    from autocomp.stages import negatives_stage
    from autocomp.tables import open_parquet

    total = open_parquet(args.input).metadata.num_rows
    with row_progress("negatives", total) as advance:
        summary = negatives_stage(
            args.input, args.out, args.protocol, args.workers, args.batch_size, advance
        )
    print(
        f"wrote {summary['rows']:,} rows to {args.out} ({args.protocol} protocol): "
        f"{summary['swap']:,} swap, {summary['confusion']:,} confusion, "
        f"{summary['vary']:,} N=1 sanity negatives"
    )


def _models(args: argparse.Namespace) -> None:
    from autocomp.registry import all_models

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
    from autocomp.evaluation import score_stage
    from autocomp.progress import row_progress
    from autocomp.registry import get_model
    from autocomp.scoring import load_scorer
    from autocomp.tables import open_parquet

    entry = get_model(args.model)
    total = open_parquet(args.benchmark).metadata.num_rows
    with row_progress(f"score {entry.name}", total) as advance:
        summary = score_stage(
            entry,
            args.benchmark,
            args.out,
            lambda: load_scorer(entry.name, device=args.device),
            images_root=args.images,
            blind=args.blind,
            progress=advance,
        )
    rows = [
        [
            r["family"], str(r["n"]), r["condition"], r["set"], r["protocol"], str(r["items"]),
            f"{100 * r['accuracy']:.1f}", f"{100 * r['chance']:.2f}",
            str(r["failed"]), str(r["ties"]),
        ]
        for r in summary.to_pylist()
    ]  # fmt: skip
    headers = ["family", "N", "condition", "set", "protocol", "items", "acc %", "chance %",
               "failed", "ties"]  # fmt: skip
    print(format_table(headers, rows))
    print(f"scores, predictions and summary in {args.out}")


def _demo(args: argparse.Namespace) -> None:
    from autocomp.demo import run_demo

    run_demo(args.out, args.count, args.seed)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain, aligned text table (stable output for terminals, logs and tests)."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(row, widths)) for row in rows]
    return "\n".join(s.rstrip() for s in out)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autocomp",
        description="Exact, reproducible compositional benchmarks for vision-language models.",
    )
    parser.add_argument("--version", action="version", version=f"autocomp {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)

    p = verbs.add_parser("families", help="list the task families and their vocabulary sizes")
    p.set_defaults(run=_families)

    p = verbs.add_parser("sample", help="sample concepts and write their Minimal captions")
    p.add_argument("--family", required=True, help="task family (see `autocomp families`)")
    p.add_argument("--n", type=int, required=True, help="number of objects per concept")
    p.add_argument("--count", type=int, required=True, help="number of distinct concepts")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", required=True, help="output Parquet file (concepts table)")
    p.set_defaults(run=_sample)

    p = verbs.add_parser("negatives", help="build Swap and Confusion candidate sets")
    p.add_argument("--input", required=True, help="concepts table or curated table (Parquet)")
    p.add_argument("--out", required=True, help="output Parquet file (benchmark table)")
    p.add_argument(
        "--protocol",
        default="paper",
        choices=("paper", "strict"),
        help="paper: keep candidates that describe the positive's scene (flagged); "
        "strict: drop them (default paper)",
    )
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: up to 2)")
    p.add_argument("--batch-size", type=int, default=256, help="rows per batch (default 256)")
    p.set_defaults(run=_negatives)

    p = verbs.add_parser("models", help="list the registered models with backend and resources")
    p.set_defaults(run=_models)

    p = verbs.add_parser("score", help="score one model on one benchmark table")
    p.add_argument("--model", required=True, help="registered model name (see `autocomp models`)")
    p.add_argument("--benchmark", required=True, help="benchmark table (autocomp negatives)")
    p.add_argument("--out", required=True, help="output folder (resumable)")
    p.add_argument("--images", default=None, help="folder the benchmark's image paths are under")
    p.add_argument("--device", default=None, help="torch device (default: cuda if present)")
    p.add_argument("--blind", action="store_true", help="score captions without the image")
    p.set_defaults(run=_score)

    p = verbs.add_parser("demo", help="sample every family, build candidate sets, print a summary")
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    p.add_argument("--count", type=int, default=200, help="concepts per family and N (default 200)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except UsageError as exc:
        print(f"autocomp {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
