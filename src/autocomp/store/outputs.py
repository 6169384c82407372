"""The one rule for output paths: outputs create their parent folders.

Every verb's `--out` (a table, a stage folder, a run, a report, an import) is checked here
before any work, and its missing parents are made here when something is first written:

- `check_output(path)`: `path` is not under a file (every ancestor that exists is a folder)
  and, for a new path, the nearest existing ancestor takes new files (probed). Missing
  parents are fine: the check creates nothing, so a call that fails before its first write
  leaves nothing.
- `made_parents(path)`: a block that creates `path`'s missing ancestors and, when it fails,
  removes again the ones it created that are still empty (store/atomic.py runs every atomic
  write inside one, so the first file written brings its folders and a failed one takes them
  back). `output_folder(path)` does the same for the folder `path` itself.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from autocomp.errors import UsageError


def check_writable(folder: Path, option: str, shown: Path) -> None:
    """The folder accepts a new file (probed: permissions, read-only file systems and special
    file systems all answer the same way), checked before any work starts."""
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".autocomp-probe-"):
            pass
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        fix = f"cannot be written ({reason}); choose another path"
        raise UsageError(option, str(shown), fix) from None


def nearest_existing(path: str | Path) -> Path:
    """The closest ancestor of `path` that exists (or is a link), `path` itself excluded."""
    for ancestor in Path(path).parents:
        if ancestor.exists() or ancestor.is_symlink():
            return ancestor
    return Path(".")  # (not reached: "." and "/" exist)


def check_output(path: str | Path, option: str = "out") -> Path:
    """The output path `path` can be written, checked before any work: nothing above it is a
    file and, when `path` is not there yet, its nearest existing folder takes new files.
    Whether `path` itself may exist (a table, a folder to resume) is the caller's rule."""
    path = Path(path)
    if path.exists():
        return path  # (its ancestors are folders; the caller checks what it holds)
    ancestor = nearest_existing(path)
    if not ancestor.is_dir():
        raise UsageError(
            option, str(path), f"lies under {ancestor}, which is a file; give a path in a folder"
        )
    check_writable(ancestor, option, path)
    return path


def _missing(folder: Path) -> list[Path]:
    """`folder` and its ancestors that do not exist, the outermost first."""
    missing = []
    while not (folder.exists() or folder.is_symlink()) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing[::-1]


@contextlib.contextmanager
def _created(folder: Path) -> Iterator[None]:
    missing = _missing(folder)
    for made in missing:
        made.mkdir(exist_ok=True)
    try:
        yield
    except BaseException:
        for made in reversed(missing):  # the innermost first; a folder with files stays
            with contextlib.suppress(OSError):
                made.rmdir()
        raise


def made_parents(path: str | Path) -> contextlib.AbstractContextManager[None]:
    """Create the missing parents of `path` for the block; a failed block removes those it
    created that are still empty."""
    return _created(Path(path).parent)


def output_folder(path: str | Path) -> contextlib.AbstractContextManager[None]:
    """Create the folder `path` (and its missing parents) for the block; a failed block removes
    those it created that are still empty."""
    return _created(Path(path))
