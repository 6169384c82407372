"""Where a stage's images are: a folder (the CLI: `--out`, `--render`, `--images`) or a prefix
of a store (the pipelines: render writes its images straight into the store, validate and
publish read them from there). Both answer the same few calls with image references relative to
their root (`images/<concept>/<condition>.png`, what the render table's `image` column holds),
and both refuse a reference that would leave the root (store.paths).

- `open_many(refs)`: what PIL opens for each (a resolved path, or the bytes fetched from the
  store, `workers` at a time);
- `read(ref)`: the file's bytes; `write(ref, data)`: an atomic write;
- `present(sub)`: the references below `sub` that exist (one listing, for a resumed shard).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from autocomp.store.atomic import atomic_path
from autocomp.store.paths import OutsideRoot, resolve_inside
from autocomp.store.storage import Store
from autocomp.store.stores import open_store
from autocomp.store.transfer import DEFAULT_WORKERS, ordered_map


class Images(Protocol):
    where: str

    def open_many(self, refs: Sequence[str]) -> list[Any]: ...
    def read(self, ref: str) -> bytes: ...
    def write(self, ref: str, data: bytes) -> None: ...
    def present(self, sub: str) -> set[str]: ...


class ImageFolder:
    """Images under a folder (references resolve inside it, links included)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.where = str(self.root)

    def path(self, ref: str) -> Path:
        return resolve_inside(self.root, ref)

    def open_many(self, refs: Sequence[str]) -> list[Any]:
        """Each reference's resolved path, or the OutsideRoot it raised (the item fails)."""
        out: list[Any] = []
        for ref in refs:
            try:
                out.append(self.path(ref))
            except OutsideRoot as exc:
                out.append(exc)
        return out

    def read(self, ref: str) -> bytes:
        return self.path(ref).read_bytes()

    def write(self, ref: str, data: bytes) -> None:
        path = self.root / safe_ref(ref)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)

    def present(self, sub: str) -> set[str]:
        base = self.root / safe_ref(sub)
        if not base.is_dir():
            return set()
        return {p.relative_to(self.root).as_posix() for p in base.rglob("*.png") if p.is_file()}


def safe_ref(ref: str) -> str:
    """A reference as a relative path that stays inside its root (else OutsideRoot)."""
    if not isinstance(ref, str) or not ref or "\0" in ref or "\\" in ref:
        raise OutsideRoot(f"not a usable relative path: {ref!r}")
    parts = PurePosixPath(ref).parts
    if ref.startswith("/") or any(p in ("..", ".", "") for p in parts):
        raise OutsideRoot(f"path leaves the images root: {ref}")
    return "/".join(parts)


class StoreImages:
    """Images under a prefix of a store (each one object; fetched `workers` at a time)."""

    def __init__(self, store: Store | str, prefix: str, workers: int = DEFAULT_WORKERS) -> None:
        self.store = open_store(store) if isinstance(store, str) else store
        self.prefix = prefix.strip("/")
        self.workers = workers
        self.where = f"{self.store.uri}/{self.prefix}"

    def key(self, ref: str) -> str:
        return f"{self.prefix}/{safe_ref(ref)}"

    def _open(self, ref: str) -> Any:
        try:
            key = self.key(ref)
        except OutsideRoot as exc:
            return exc
        data = self.store.read_bytes(key, missing_ok=True)
        return FileNotFoundError(ref) if data is None else io.BytesIO(data)

    def open_many(self, refs: Sequence[str]) -> list[Any]:
        """Each image's bytes (as a file), fetched in parallel; a missing one is a
        FileNotFoundError, an unsafe reference an OutsideRoot (the item fails)."""
        return list(ordered_map(self._open, list(refs), self.workers))

    def read(self, ref: str) -> bytes:
        return self.store.read_bytes(self.key(ref))  # type: ignore[return-value]

    def read_many(self, refs: Sequence[str]) -> list[bytes]:
        return list(ordered_map(self.read, list(refs), self.workers))

    def write(self, ref: str, data: bytes) -> None:
        self.store.write_bytes(self.key(ref), data)

    def present(self, sub: str) -> set[str]:
        base = f"{self.prefix}/"
        return {o.key[len(base) :] for o in self.store.list(self.key(sub))}
