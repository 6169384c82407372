"""Atomic writes: a file or folder appears under its final name only once it is complete.

Every temporary write goes through this module and is named one way, beside its target:

    .NAME.tmp-PID-XXXXXXXX    hidden; PID: the writing process; X: 8 random hex digits, so two
                              writers of one process (threads) never share a temporary

A block that fails, or is interrupted, removes its temporary on the way out; a killed process
cannot, so `sweep_stale` (called by every stage before it writes into a folder) removes the
temporaries whose process is gone and leaves a live process's alone. For one release it also
sweeps the shapes the previous version wrote (`.NAME.tmp-PID`, `.NAME.report-PID`,
`.NAME.fetch-PID`, `.fetch-PID`), so a folder a killed run of that version left is still cleaned.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from autocomp.store.outputs import made_parents

# (matched whole, with fullmatch; a file name may hold any character but "/")
TEMP_NAME = re.compile(r"\.(?P<name>.+)\.tmp-(?P<pid>[0-9]+)-(?P<tag>[0-9a-f]{8})", re.DOTALL)
# the previous version's shapes (swept for one release; nothing writes them any more)
OLD_TEMP_NAMES = re.compile(
    r"\.(?:.+\.(?:tmp|report|fetch)|fetch)-(?P<pid>[0-9]+)(?:-[0-9a-f]+)?", re.DOTALL
)


def temp_path(path: str | Path) -> Path:
    """A fresh temporary name beside `path`, in the one shape (nothing is created)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary file path beside `path` (missing parents are created, and removed
    again if the block fails: store/outputs.py); it is renamed to `path` only if the block
    succeeds, and removed otherwise."""
    path = Path(path)
    tmp = temp_path(path)
    with made_parents(path):
        try:
            yield tmp
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()


@contextlib.contextmanager
def atomic_folder(path: str | Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a new empty folder beside `path` (missing parents are created, and removed again
    if the block fails); when the block succeeds it is renamed to `path`, otherwise removed. An
    existing `path` is swapped out and removed with `replace`; without it, an existing
    non-empty `path` is a FileExistsError (a concurrent writer finished first) and this
    block's folder is discarded."""
    path = Path(path)
    with made_parents(path), _atomic_folder(path, replace) as tmp:
        yield tmp


@contextlib.contextmanager
def _atomic_folder(path: Path, replace: bool) -> Iterator[Path]:
    tmp = temp_path(path)
    tmp.mkdir()
    old: Path | None = None
    try:
        yield tmp
        if replace and (path.exists() or path.is_symlink()):
            old = temp_path(path)
            os.replace(path, old)
        try:
            os.rename(tmp, path)
        except OSError as exc:
            if not replace and path.is_dir():
                raise FileExistsError(exc.errno, "exists already", str(path)) from exc
            raise
    finally:
        _remove(tmp)
        if old is not None:
            _remove(old)


@contextlib.contextmanager
def scratch_folder(beside: str | Path) -> Iterator[Path]:
    """Yield a new empty working folder beside `beside`, named in the one shape (so a killed
    run's is swept) and removed when the block ends, however it ends (missing parents are
    created, and removed again if the block fails)."""
    tmp = temp_path(beside)
    with made_parents(beside):
        tmp.mkdir()
        try:
            yield tmp
        finally:
            _remove(tmp)


def write_text(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Write a whole text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding=encoding)


def write_json(path: str | Path, obj: Any, *, indent: int | None = 1) -> None:
    """Write a JSON document atomically (keys sorted, so the same object gives the same bytes)."""
    write_text(path, json.dumps(obj, indent=indent, sort_keys=True))


def is_temporary(name: str) -> int | None:
    """The writer's process id if `name` is a temporary's name (the one shape, or one of the
    previous version's), else None."""
    match = TEMP_NAME.fullmatch(name) or OLD_TEMP_NAMES.fullmatch(name)
    return int(match["pid"]) if match else None


def sweep_stale(folder: str | Path) -> list[Path]:
    """Remove the temporaries (files and folders) that killed runs left directly in `folder`,
    those whose process is gone; a live process's are left alone. Returns what was removed."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for path in sorted(folder.iterdir()):
        pid = is_temporary(path.name)
        if pid is None or alive(pid):
            continue
        _remove(path)
        removed.append(path)
    return removed


def alive(pid: int) -> bool:
    """Whether process `pid` runs (this process always does; one of another user does too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:  # not a process id at all: nobody is writing it
        return False
    return True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
