"""The local store: outputs as folders under a root, each renamed into place when complete;
objects as files under the root, each renamed into place when complete (autocomp.store.storage
holds the protocol every store follows)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from autocomp.store.atomic import atomic_folder, atomic_path, sweep_stale, temp_path
from autocomp.store.storage import (
    MANIFEST,
    RESUME_NOTE,
    ObjectInfo,
    OutputWriter,
    StorageError,
    _fetch_verified,
    _inside,
    build_manifest,
    check_key,
    complete_manifest,
    file_sha256,
    manifest_entry,
    parse_manifest,
)
from autocomp.store.transfer import DEFAULT_WORKERS


@contextlib.contextmanager
def local_errors(uri: str, key: str, action: str) -> Iterator[None]:
    """An OSError of a local store as one line naming the store, the key and the fix."""
    try:
        yield
    except OSError as exc:
        code = exc.errno or 0
        if code in (errno.ENOSPC, errno.EDQUOT):
            fix = "the disk is full: free space there or give a store with room"
        elif code in (errno.EACCES, errno.EPERM, errno.EROFS):
            reason = (exc.strerror or "").lower()
            fix = f"it refuses the write ({reason}): give a store you may write to"
        elif isinstance(exc, FileNotFoundError) and action == "reading":
            fix = "the object is missing: the output is incomplete; run the step that makes it"
        else:
            fix = f"{(exc.strerror or type(exc).__name__).lower()}: check the store folder"
        raise StorageError(f"store {uri}: {action} {key}: {fix}; then {RESUME_NOTE}") from None


class LocalWriter(OutputWriter):
    """A local output is staged in a hidden folder beside its name and renamed into place."""

    def __init__(self, store: LocalStore, name: str, made_by: dict | None, workers: int) -> None:
        super().__init__(name, made_by, workers)
        self.store = store
        self.target = store.root / self.name
        self.done = store.manifest(self.name)
        self.staging: Path | None = None
        if self.done is None:
            with local_errors(store.uri, self.name, "writing"):
                self.target.parent.mkdir(parents=True, exist_ok=True)
                sweep_stale(self.target.parent)
                self.staging = temp_path(self.target)
                self.staging.mkdir()

    def _place(self, rel: str) -> Path:
        assert self.staging is not None
        path = self.staging / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _send_file(self, rel: str, path: Path, sha256: str) -> None:
        with local_errors(self.store.uri, f"{self.name}/{rel}", "writing"):
            shutil.copyfile(path, self._place(rel))

    def _send_bytes(self, rel: str, data: bytes, sha256: str) -> None:
        with local_errors(self.store.uri, f"{self.name}/{rel}", "writing"):
            self._place(rel).write_bytes(data)

    def _send_copy(self, rel: str, key: str, sha256: str) -> None:
        with local_errors(self.store.uri, f"{self.name}/{rel}", "writing"):
            shutil.copyfile(self.store._path(key), self._place(rel))

    def _finish(self, manifest: dict[str, Any]) -> None:
        assert self.staging is not None
        with local_errors(self.store.uri, f"{self.name}/{MANIFEST}", "writing"):
            (self.staging / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
            old = None
            if self.target.exists():  # an incomplete earlier attempt (no manifest): replaced
                old = temp_path(self.target)
                os.replace(self.target, old)
            os.rename(self.staging, self.target)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)

    def _abort(self) -> None:
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)


class LocalStore:
    """Outputs as folders under a root; a finished output is renamed into place atomically.
    Objects are files under the root, each renamed into place when complete."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.uri = self.root.as_uri() if self.root.is_absolute() else str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def manifest(self, name: str) -> dict[str, Any] | None:
        path = self._path(name) / MANIFEST
        return parse_manifest(path.read_bytes(), f"{self.uri}/{name}") if path.is_file() else None

    def put(self, name: str, folder: str | Path, made_by: dict | None = None) -> dict:
        name = check_key(name)
        existing = self.manifest(name)
        if existing is not None:
            return existing
        manifest = build_manifest(name, Path(folder), made_by)
        target = self.root / name
        with local_errors(self.uri, name, "writing"):
            target.parent.mkdir(parents=True, exist_ok=True)
            sweep_stale(target.parent)
            # replace: a folder there without a manifest is an incomplete earlier attempt
            with atomic_folder(target, replace=True) as tmp:
                shutil.copytree(
                    folder, tmp, ignore=shutil.ignore_patterns(MANIFEST), dirs_exist_ok=True
                )
                (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        return manifest

    def get(
        self, name: str, folder: str | Path, only: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        """The output's files (`only`: those whose path it accepts) into `folder`, verified."""
        manifest = complete_manifest(self, name)
        source = self._path(name)
        copy = lambda p, t: shutil.copyfile(source / p, t)  # noqa: E731
        _fetch_verified(manifest, Path(folder), copy, only)
        return manifest

    def get_file(self, name: str, path: str, target: str | Path) -> Path:
        """One file of a complete output, verified, written atomically to `target`."""
        manifest = complete_manifest(self, name)
        entry = manifest_entry(manifest, path)
        with atomic_path(target) as tmp:
            shutil.copyfile(self._path(name) / _inside(path), tmp)
            if file_sha256(tmp) != entry["sha256"]:
                raise StorageError(f"{path}: content does not match the manifest's SHA-256")
        return Path(target)

    def outputs(self, prefix: str = "") -> list[str]:
        folder = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        base = self.root / check_key(folder) if folder else self.root
        if not base.is_dir():
            return []
        found = (p.parent.relative_to(self.root).as_posix() for p in base.rglob(MANIFEST))
        # a put in progress (or killed) stages under a hidden temporary folder: not output
        visible = (n for n in found if not any(part.startswith(".") for part in n.split("/")))
        return sorted(n for n in visible if n.startswith(prefix))

    def writer(
        self, name: str, made_by: dict | None = None, workers: int = DEFAULT_WORKERS
    ) -> OutputWriter:
        return LocalWriter(self, name, made_by, workers)

    # ------------------------------------------------------------------ objects

    def write_bytes(self, key: str, data: bytes) -> None:
        path = self._path(key)
        with local_errors(self.uri, key, "writing"):
            path.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(path) as tmp:
                tmp.write_bytes(data)

    def read_bytes(self, key: str, missing_ok: bool = False) -> bytes | None:
        """The object's bytes (None for a missing one with `missing_ok`)."""
        path = self._path(key)
        if missing_ok and not path.is_file():
            return None
        with local_errors(self.uri, key, "reading"):
            return path.read_bytes()

    def stat(self, key: str) -> ObjectInfo | None:
        path = self._path(key)
        return ObjectInfo(check_key(key), path.stat().st_size) if path.is_file() else None

    def open(self, key: str, size: int | None = None) -> IO[bytes]:
        with local_errors(self.uri, key, "reading"):
            return open(self._path(key), "rb")

    def list(self, prefix: str) -> list[ObjectInfo]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        found = []
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(self.root)
            if path.is_file() and not any(p.startswith(".") for p in rel.parts):
                found.append(ObjectInfo(rel.as_posix(), path.stat().st_size))
        return found

    def delete(self, prefix: str) -> int:
        base = self._path(prefix)
        count = sum(1 for p in base.rglob("*") if p.is_file()) if base.is_dir() else 0
        with local_errors(self.uri, prefix, "deleting"):
            shutil.rmtree(base, ignore_errors=False) if base.is_dir() else None
        return count
