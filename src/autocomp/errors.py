"""One error type for bad input: it names the input, the offending value and the fix.

`what` is in the library's vocabulary: a configuration field or function parameter by its
Python name (`limit`, `batch_size`, `models`), or a file by its path when its content is wrong;
never a CLI flag. The CLI prints it with the flag the user typed (autocomp.cli.flags).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


class UsageError(Exception):
    """Bad input from a user: a flag, a file or a config. The CLI prints it and exits with 2."""

    def __init__(self, what: str, value: object, fix: str) -> None:
        self.what = what
        self.value = value
        self.fix = fix
        super().__init__(f"{what}: {value!r}: {fix}")

    def __reduce__(self) -> tuple[type, tuple[str, object, str]]:
        # Raised in worker processes too: must survive pickling back to the parent.
        return (type(self), (self.what, self.value, self.fix))


class ParameterError(UsageError):
    """A pipeline parameter failed its check (autocomp.pipelines.checks): `what` is the
    parameter's name as the pipeline spells it (`caption_engine`, `count`), however the check
    that failed names the field it guards."""


class ProtocolError(Exception):
    """An internal invariant of the protocol broke (a bug, never bad input)."""


def whole_number(text: str) -> int | None:
    """`text` as a whole number 0 or more when it is ASCII digits only, else None: the one
    rule for a number typed inside a value (`color:2`, `render=48`). str.isdigit() also takes
    '²' (which int() refuses) and '١' (which int() reads as 1)."""
    return int(text) if text.isascii() and text.isdigit() else None


def shorten(text: str, limit: int = 160) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters, with "..."
    when cut ("An error happened while trying to..." rather than "An err")."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:.") + "..."


WITH_PROFILE = "or use --profile tiny (random weights, no download)"
WITHOUT_PROFILE = (
    "or choose a model whose weights need no download (`autocomp models`: the tiny-* ones, "
    "random weights)"
)


def weights_error(
    what: str, weights: str, exc: BaseException, instead: str = WITH_PROFILE
) -> UsageError:
    """The one message for weights that could not be loaded (offline machine, gated model,
    wrong id): names the model and its weights, the cause, and the ways out (`instead`: the
    last one, as the verb that loads them can take it: a profile, or another model)."""
    return UsageError(
        what,
        weights,
        f"weights could not be loaded ({type(exc).__name__}: {shorten(str(exc))}); on an "
        "offline machine, download them into the Hugging Face cache first (HF_HOME); gated "
        f"models need HF_TOKEN; {instead}",
    )


class _RaisedAnyway(logging.Filter):
    """Drops the root logger's ERROR records that start with `prefix` (and nothing else)."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.getMessage().startswith(self.prefix))


@contextlib.contextmanager
def raised_not_logged(prefix: str = "Failed to download weights") -> Iterator[None]:
    """open_clip logs "Failed to download weights ..." on the root logger and then raises the
    same message, which weights_error turns into the one error line: the log record would be a
    second line saying the same, so it is dropped while open_clip loads a model."""
    with root_filter(_RaisedAnyway(prefix)):
        yield


@contextlib.contextmanager
def root_filter(quiet: logging.Filter) -> Iterator[None]:
    """`quiet` on the root logger (where open_clip logs) for the block, and only then."""
    root = logging.getLogger()
    root.addFilter(quiet)
    try:
        yield
    finally:
        root.removeFilter(quiet)
