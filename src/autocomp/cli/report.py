"""The report verb: every analysis of a run as HTML, CSV, Parquet and LaTeX."""

from __future__ import annotations

import argparse
from pathlib import Path

from autocomp.errors import UsageError


def _report(args: argparse.Namespace) -> None:
    from autocomp.analysis.report import report_from_store, report_stage

    if bool(args.run_dir) == bool(args.store):
        raise UsageError("--run", args.run_dir, "give a run folder (--run) or --store with --name")
    if args.store:
        out = args.out or Path("reports", str(args.name or "report"))
        done = report_from_store(args.store, args.name, out, args.seed, args.compare)
    else:
        out = args.out or Path(args.run_dir, "report")  # into the run, where `autocomp run` puts it
        done = report_stage(args.run_dir, out, args.seed, compare=args.compare)
    print(
        f"report: {done['html']} ({len(done['paper'])} paper-layout tables as CSV and LaTeX, "
        f"{len(done['tables'])} long tables as CSV, Parquet and LaTeX in "
        f"{done['html'].parent / 'tables'})"
    )
    for note in done["omitted"]:
        print(f"  {note}")
    for line in done.get("computed_on", []):
        print(f"  computed on: {line}")


def _leaderboard(args: argparse.Namespace) -> None:
    from autocomp.analysis.leaderboard_page import write_leaderboard

    done = write_leaderboard(args.store, args.out, args.force)
    runs = ", ".join(f"{n} {status}" for status, n in sorted(done["runs"].items())) or "no run"
    print(f"leaderboard: {done['html']} ({done['models']} model rows; runs: {runs})")
    if done["runs"].get("damaged"):
        print("  damaged runs are listed on the page and left out of every number")


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the report and leaderboard verbs."""
    lb = verbs.add_parser(
        "leaderboard",
        help="every score run in one or more stores: accuracy with intervals, rank intervals, "
        "mean win rate, provenance (HTML, CSV, JSON)",
    )
    lb.add_argument(
        "--store",
        action="append",
        required=True,
        help="a store (folder or s3:// URI) holding results/<benchmark>/<model> (repeatable)",
    )
    lb.add_argument("--out", default="leaderboard", help="output folder (default: leaderboard)")
    lb.add_argument("--force", action="store_true", help="replace an existing output folder")
    lb.set_defaults(run=_leaderboard)
    p = verbs.add_parser("report", help="HTML report, CSV, Parquet and LaTeX tables of a run")
    p.add_argument(
        "--run", dest="run_dir", default=None, help="run folder: benchmark/ and results/<model>/"
    )
    p.add_argument(
        "--store",
        default=None,
        help="or: a store holding benchmarks/<name>, results/<name>/<model> and optionally "
        "human/<name>, judges/<name>",
    )
    p.add_argument("--name", default=None, help="benchmark name in the store")
    p.add_argument(
        "--out",
        default=None,
        help="output folder (default: RUN/report with --run, reports/NAME with --store)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the paired bootstraps")
    p.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="RUN",
        help="another generator's run on the same concepts (repeatable; Table 9): a run folder "
        "with --run, a benchmark name in the store with --store",
    )
    p.set_defaults(run=_report)
