"""The `autocomp` command line: one entry point, one verb per stage, `--help` on every verb.

Bad input exits with code 2 and one line that names the input, the value and the fix. The verbs
live in one module per group (protocol, generation, scoring, pipelines, report).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from autocomp import __version__
from autocomp.cli import audit, finetune, generation, pipelines, protocol, report, scoring
from autocomp.errors import UsageError

GROUPS = (protocol, generation, scoring, pipelines, report, audit, finetune)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autocomp",
        description="Exact, reproducible compositional benchmarks for vision-language models.",
    )
    parser.add_argument("--version", action="version", version=f"autocomp {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for group in GROUPS:
        group.add_parsers(verbs)
    return parser


def _quiet_libraries() -> None:
    """Model libraries log per-file loading bars and advice; autocomp shows its own progress."""
    import os

    for name in ("TRANSFORMERS_VERBOSITY", "DIFFUSERS_VERBOSITY"):
        os.environ.setdefault(name, "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main(argv: Sequence[str] | None = None) -> int:
    _quiet_libraries()
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
