"""Verb that brings in benchmarks autocomp did not make: import (a benchmark folder)."""

from __future__ import annotations

import argparse
from typing import Any

from autocomp.cli.exports import RESULT_FORMATS
from autocomp.config import ImportConfig

DEFAULTS = ImportConfig()


def summary_lines(report: dict[str, Any], out: str) -> list[str]:
    """The printed summary of an import report."""
    lines = [f"imported {report['samples']} samples into {out} ({report['format']})"]
    for key in (
        "layout",
        "rows",
        "items",
        "concepts",
        "paired_concepts",
        "images_decoded",
        "captions_kept_as_written",
        "groups",
        "rule",
        "tie",
        "aggregate",
    ):
        if key in report:
            lines.append(f"  {key.replace('_', ' ')}: {report[key]}")
    for key in ("rows_dropped", "samples_dropped", "groups_dropped"):
        for reason, count in (report.get(key) or {}).items():
            lines.append(f"  {key.replace('_', ' ')}: {count} ({reason})")
    for role in ("objects", "attributes", "relations"):
        part = report.get(role) or {}
        unmapped = part.get("unmapped") or {}
        if unmapped:
            names = ", ".join(f"{name} x{count}" for name, count in list(unmapped.items())[:8])
            more = f" and {len(unmapped) - 8} more" if len(unmapped) > 8 else ""
            lines.append(f"  unmapped {role}: {names}{more}")
        renamed = part.get("normalised") or {}
        if renamed:
            pairs = [f"{name} -> {m['to']}" for name, m in list(renamed.items())[:8]]
            more = f" and {len(renamed) - 8} more" if len(renamed) > 8 else ""
            lines.append(f"  normalised {role}: {', '.join(pairs)}{more}")
    lines.append(f"  details: {out}/import_report.json")
    return lines


def _import(args: argparse.Namespace) -> None:
    from autocomp.importers import import_benchmark

    if args.format in RESULT_FORMATS:  # a harness's predictions of an export, not a benchmark
        RESULT_FORMATS[args.format](args)
        return

    config = ImportConfig(
        protocol=args.protocol,
        skip_missing=args.skip_missing,
        force=args.force,
        condition=args.condition or "",
    )
    report = import_benchmark(args.format, args.source, args.out, args.images, config)
    print("\n".join(summary_lines(report, args.out)))


def add_parsers(verbs: argparse._SubParsersAction) -> None:
    """Register the import verb."""
    p = verbs.add_parser(
        "import", help="write a benchmark autocomp did not make as a benchmark folder"
    )
    p.add_argument(
        "format",
        metavar="FORMAT",
        help="autocomp-release, sugarcrepe, or a harness benchmark: winoground, eqben, mmvp-vlm, "
        "spec, ... (docs/usage/import.md); vlmevalkit-results: VLMEvalKit's predictions of an "
        "export (docs/harnesses.md)",
    )
    p.add_argument("--source", required=True, help="the release's files (docs/usage/import.md)")
    p.add_argument("--out", required=True, help="benchmark folder to write (must not exist)")
    p.add_argument("--images", default=None, help="folder the source's image file names are under")
    p.add_argument(
        "--protocol", default=DEFAULTS.protocol, help="candidate-set protocol: paper or strict"
    )
    p.add_argument(
        "--skip-missing",
        action="store_true",
        help="drop and count items whose image is missing or does not decode",
    )
    p.add_argument(
        "--condition",
        choices=("minimal", "contextual"),
        help="autocomp-release: the condition of a caption/image source (default: from its "
        "name, AutoComp-Minimal-* / AutoComp-Contextual-*), or one condition of a Paired one",
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out folder")
    p.add_argument(
        "--key", default=None, help="vlmevalkit-results: the export's AutoComp_key.parquet"
    )
    p.add_argument("--model", default=None, help="vlmevalkit-results: the model's name in the run")
    p.set_defaults(run=_import)
