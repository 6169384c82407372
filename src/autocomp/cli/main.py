"""The `autocomp` command line: one entry point, one verb per stage, `--help` on every verb.

Bad input exits with code 2 and one line on stderr that names the input, the value and the fix:
UsageError from the stages (which name a field or parameter; printed with the flag the user
typed, autocomp.cli.flags), argparse's own complaints (one line, not its usage block), and file
system errors on the paths a user gave. Ctrl-C exits 130 after the stage has removed its partial
output. A store that stays unreachable after its retries exits 1, also with one line. The verbs
live in one module per group (protocol, generation, scoring, imports, pipelines, cluster, plan,
report, audit, finetune); `audit` and `finetune` are verb groups (`autocomp finetune score`).
"""

from __future__ import annotations

import argparse
import errno
import sys
from collections.abc import Sequence
from typing import NoReturn

from autocomp import __version__
from autocomp.cli import (
    audit,
    cluster,
    exports,
    finetune,
    flags,
    generation,
    imports,
    pipelines,
    plan,
    protocol,
    report,
    scoring,
)
from autocomp.errors import UsageError
from autocomp.store.storage import StorageError

GROUPS = (
    protocol,
    generation,
    scoring,
    imports,
    exports,
    pipelines,
    cluster,
    plan,
    report,
    audit,
    finetune,
)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (the input, the problem, where to look)."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
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


def _path_error(exc: OSError) -> str:
    """One line for a file system error on a path the user gave."""
    reason = (exc.strerror or type(exc).__name__).lower()
    fix = {
        errno.EACCES: "choose a path you may write to",
        errno.EPERM: "choose a path you may write to",
        errno.EROFS: "the file system is read-only; choose another path",
        errno.ENOSPC: "free some disk space or choose another disk",
        errno.EISDIR: "give a file here, not a folder",
        errno.ENOTDIR: "a part of this path is a file; give a path inside a folder",
        errno.ENOENT: "check the path",
        errno.EEXIST: "choose a new path",
    }.get(exc.errno or 0, "check the path")
    return f"{exc.filename!r}: {reason}: {fix}"


def main(argv: Sequence[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    argv, pointer = finetune.respell(sys.argv[1:] if argv is None else argv)
    if pointer:  # an old spelling, kept one release
        print(pointer, file=sys.stderr)
    args = parser.parse_args(argv)
    words = [v for v in (args.verb, getattr(args, f"{args.verb}_verb", None)) if v]
    verb = " ".join(words)
    try:
        args.run(args)
    except UsageError as exc:  # named in the library's words: printed with the flags typed
        message = flags.cli_message(verb, exc, flags.verb_names(parser, words))
        print(f"autocomp {verb}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            f"autocomp {verb}: interrupted; finished outputs are kept and partial ones removed: "
            "run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    except StorageError as exc:
        print(f"autocomp {verb}: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.filename is None:
            raise
        print(f"autocomp {verb}: error: {_path_error(exc)}", file=sys.stderr)
        return 2
    return 0


def entry() -> int:
    """The `autocomp` command: main(), then a quick exit (autocomp.process.ending: the process
    skips its last full garbage collection, 1-3 s once a model library is imported). Tests call
    main() in their own process, which must not freeze."""
    from autocomp.process import ending

    code = main()
    ending()
    return code


if __name__ == "__main__":
    sys.exit(entry())
