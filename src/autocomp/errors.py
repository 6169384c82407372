"""One error type for bad input: it names the input, the offending value and the fix."""

from __future__ import annotations


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


class ProtocolError(Exception):
    """An internal invariant of the protocol broke (a bug, never bad input)."""
