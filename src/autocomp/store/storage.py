"""Object storage for everything a run keeps: a local folder by default, S3/MinIO through
`minio` (store/s3.py).

Two kinds of things live in a store, both under keys relative to its root ("work/render/...",
"benchmarks/color-run1"):

- an *output*: a folder of files stored under a name, visible only when complete. Its files are
  written first and a manifest (`_manifest.json`: every file's path, size and SHA-256, plus who
  made it) last. Readers ignore outputs without a manifest and verify every file they fetch
  against it. A `put` of an output that is already complete is skipped (the resume rule for
  killed steps); an interrupted `put` leaves no manifest, and its re-run uploads only the files
  that are not there yet (S3 objects carry their SHA-256 as metadata). `writer` builds an output
  file by file as its files are made (publish's shards, a score step's parts), uploading them
  in parallel, manifest last.
- an *object*: one file under one key (a rendered image), written atomically (a local file is
  renamed into place, an S3 PUT is atomic), read whole, by range (`open`, what pyarrow streams
  Parquet from) or listed by prefix.

Store URIs: a path or `file:///path` (LocalStore, store/local.py), `s3://bucket/prefix`
(S3Store, store/s3.py). S3 settings
come from the environment, never from arguments that would end up in compiled pipelines:
`AUTOCOMP_S3_ENDPOINT` (e.g. `http://minio-service.kubeflow:9000`), `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY` (on the cluster: from a Kubernetes Secret). Transient failures
(connection refused or reset, timeouts, 5xx, SlowDown) are retried with exponential backoff.

Every failure that stops a step is one line naming the store, the key and the fix
(`StorageError`: unreachable, full, refusing writes; `UsageError`: credentials, bucket, a missing
object); nothing partial is ever visible as complete.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from autocomp import __version__
from autocomp.errors import UsageError
from autocomp.store.atomic import scratch_folder, sweep_stale
from autocomp.store.transfer import DEFAULT_WORKERS, RangeFile

MANIFEST = "_manifest.json"
ENDPOINT_ENV = "AUTOCOMP_S3_ENDPOINT"
KEY_ENVS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
REGION_ENVS = ("AUTOCOMP_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION")
DEFAULT_REGION = "us-east-1"  # what S3-compatible servers (SeaweedFS, MinIO) accept
RESUME_NOTE = "re-run the step: committed parts are kept and nothing partial is visible"


class StorageError(RuntimeError):
    """A store operation that failed (after its retries, where a failure may pass): one line
    naming the store, the key and the fix; nothing incomplete became visible."""


class DamagedManifest(UsageError, StorageError):
    """A manifest autocomp did not write or that was damaged (garbage, a truncated write by a
    foreign tool, a file list that is not one, an unsafe path): bad input to fix by hand, not a
    store that failed: the CLI exits 2 with its one line (a StorageError exits 1)."""

    def __init__(self, where: str, fix: str) -> None:
        UsageError.__init__(self, "manifest", where, fix)

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # type: ignore[override]
        return (type(self), (str(self.value), self.fix))


@dataclass(frozen=True)
class ObjectInfo:
    """One object of a store: its key (relative to the store's root) and size."""

    key: str
    size: int


class Store(Protocol):
    uri: str

    def manifest(self, name: str) -> dict[str, Any] | None: ...
    def put(self, name: str, folder: str | Path, made_by: dict | None = None) -> dict: ...
    def get(
        self, name: str, folder: str | Path, only: Callable[[str], bool] | None = None
    ) -> dict[str, Any]: ...
    def get_file(self, name: str, path: str, target: str | Path) -> Path: ...
    def outputs(self, prefix: str = "") -> list[str]: ...
    def writer(self, name: str, made_by: dict | None = None) -> OutputWriter: ...
    def write_bytes(self, key: str, data: bytes) -> None: ...
    def read_bytes(self, key: str, missing_ok: bool = False) -> bytes | None: ...
    def stat(self, key: str) -> ObjectInfo | None: ...
    def open(self, key: str, size: int | None = None) -> IO[bytes]: ...
    def list(self, prefix: str) -> list[ObjectInfo]: ...
    def delete(self, prefix: str) -> int: ...


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def manifest_document(name: str, files: list[dict[str, Any]], made_by: dict | None) -> dict:
    """The manifest of an output (files sorted by path)."""
    files = sorted(files, key=lambda f: f["path"])
    return {"name": name, "files": files, "autocomp_version": __version__, "made_by": made_by or {}}


def build_manifest(name: str, folder: Path, made_by: dict | None) -> dict[str, Any]:
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel == MANIFEST:
            continue
        files.append({"path": rel, "size": path.stat().st_size, "sha256": file_sha256(path)})
    if not files:
        raise UsageError("output folder", str(folder), "is empty; nothing to publish")
    return manifest_document(name, files, made_by)


def check_key(name: str) -> str:
    """A store key or output name, normalised; refused if it could leave the store's root."""
    parts = name.strip("/").split("/")
    if not name.strip("/") or any(p in ("", ".", "..") for p in parts):
        raise UsageError("output name", name, "must be a relative path like benchmarks/run-1")
    return "/".join(parts)


_check_name = check_key  # the name it had


def _verify(folder: Path, manifest: dict[str, Any]) -> None:
    for f in manifest["files"]:
        if file_sha256(folder / f["path"]) != f["sha256"]:
            raise StorageError(
                f"{manifest.get('name', '')}: {f['path']}: content does not match the "
                "manifest's SHA-256 (changed after it was written, or damaged in transit): "
                "fetch it again; if it fails again, publish the output again"
            )


def _fetch_verified(
    manifest: dict[str, Any],
    folder: Path,
    fetch: Callable[[str, Path], None],
    only: Callable[[str], bool] | None = None,
) -> None:
    """Fetch every file of an output (`only`: those whose path it accepts) into a staging
    folder beside `folder`, verify them all against the manifest, and only then move them into
    place: a tampered or truncated object never lands under the output folder."""
    if only is not None:
        manifest = {**manifest, "files": [f for f in manifest["files"] if only(f["path"])]}
    folder.mkdir(parents=True, exist_ok=True)
    sweep_stale(folder)  # what a killed fetch was staging
    with scratch_folder(folder / "fetch") as staging:
        for f in manifest["files"]:
            target = staging / _inside(f["path"])
            target.parent.mkdir(parents=True, exist_ok=True)
            fetch(f["path"], target)
        _verify(staging, manifest)
        for f in manifest["files"]:
            final = folder / f["path"]
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / f["path"], final)


def _inside(path: str, where: str = "") -> str:
    """A manifest's file path, refused if it could leave the output folder."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        if not where:  # a path the program gave (a writer's file)
            raise StorageError(f"manifest names an unsafe path {path!r}")
        fix = f"names an unsafe path {path!r}; remove the output and publish it again"
        raise DamagedManifest(where, fix)
    return path


def parse_manifest(body: bytes | str, where: str) -> dict[str, Any]:
    """A manifest's text as its document, checked: an object whose `files` is a list of
    {path, size, sha256} records with safe paths. Anything else (garbage, a truncated write by
    a foreign tool, a file list that is not a list) is one StorageError naming `where`."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedManifest(
            where, f"the manifest is not JSON ({type(exc).__name__}); it was not written by "
            "autocomp or was damaged: remove the output and publish it again",
        ) from None  # fmt: skip
    files = document.get("files") if isinstance(document, dict) else None
    good = isinstance(files, list) and all(
        isinstance(f, dict) and isinstance(f.get("path"), str)
        and isinstance(f.get("size"), int) and not isinstance(f.get("size"), bool)
        and isinstance(f.get("sha256"), str) and len(f["sha256"]) == 64
        for f in files
    )  # fmt: skip
    if not good:
        raise DamagedManifest(
            where, "the manifest's file list is not a list of {path, size, sha256} records; it "
            "was not written by autocomp or was damaged: remove the output and publish it again",
        )  # fmt: skip
    for f in files:  # type: ignore[union-attr]
        _inside(f["path"], where)
    return document


_VERIFIED: set[tuple[str, str, str]] = set()  # (store, key, sha256) read whole and matched
VERIFY_BLOCK = 8 * 1024 * 1024


def open_verified(
    store: Any, key: str, size: int, sha256: str, fix: str, verify: bool = True
) -> IO[bytes]:
    """An object of a complete output, opened for reading by range (what pyarrow streams a
    Parquet part from) once its bytes are known to be the manifest's: the first open in this
    process reads it whole, in order (one sequential pass), and compares its SHA-256 with the
    manifest's (every open compares its size); a part changed in place (same size or not) or cut
    short is one StorageError naming the key and `fix`, before anything is read from it. The
    store route (`score --store`, which downloads and verifies first) refuses the same part.
    `verify=False`: a glance (a footer, a few columns that every range pod of a score reads:
    the part plan, the id check), its size checked but not its bytes, and read without
    read-ahead (only the ranges asked for); the pod that reads the part's rows verifies it."""
    where = f"store {store.uri}: {key}"
    found = store.stat(key)  # every open: a part cut short since is caught before it is read
    if found is None:
        raise StorageError(f"{where}: the object its manifest names is missing; {fix}")
    if found.size != size:
        raise StorageError(f"{where}: {found.size} bytes where its manifest says {size} (cut "
                           f"short or replaced after it was written); {fix}")  # fmt: skip
    mark = (store.uri, key, sha256)
    if not verify:
        handle = store.open(key, size)
        if isinstance(handle, RangeFile):
            handle.block = 0  # only what is asked for: pyarrow coalesces its own ranges
        return handle
    if mark not in _VERIFIED:
        digest = hashlib.sha256()
        handle = store.open(key, size)
        try:
            for block in iter(lambda: handle.read(VERIFY_BLOCK), b""):
                digest.update(block)
        finally:
            handle.close()
        if digest.hexdigest() != sha256:
            raise StorageError(f"{where}: content does not match its manifest's SHA-256 "
                               f"(changed after it was written); {fix}")  # fmt: skip
        _VERIFIED.add(mark)
    return store.open(key, size)


def complete_manifest(store: Any, name: str) -> dict[str, Any]:
    """The manifest of `store`'s complete output `name`; a usage error naming it otherwise."""
    manifest = store.manifest(name)
    if manifest is None:
        raise UsageError("store", f"{store.uri}/{name}", "holds no complete output by that name")
    return manifest


def manifest_entry(manifest: dict[str, Any], path: str) -> dict[str, Any]:
    """The manifest's record of one file of the output (a StorageError if it has none)."""
    for f in manifest["files"]:
        if f["path"] == path:
            return f
    raise StorageError(f"{manifest['name']}: the output has no file {path}")


# ----------------------------------------------------------------------------- writing outputs


class OutputWriter:
    """One output, built file by file (`add_file`, `add_bytes`): each file is sent as it is
    added, `workers` at a time (at most 2 x workers waiting, so memory stays bounded), and the
    manifest is written only when the block ends without an error. An output already complete
    when the writer starts is left as it is (`done` tells; what is added is then dropped)."""

    def __init__(self, name: str, made_by: dict | None, workers: int = DEFAULT_WORKERS) -> None:
        self.name = check_key(name)
        self.made_by = made_by or {}
        self.files: dict[str, dict[str, Any]] = {}
        self.done: dict[str, Any] | None = None
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="autocomp-upload")
        self._slots = threading.BoundedSemaphore(2 * max(1, workers))
        self._futures: list[Future[None]] = []
        self._lock = threading.Lock()

    def _send_file(self, rel: str, path: Path, sha256: str) -> None:
        raise NotImplementedError

    def _send_bytes(self, rel: str, data: bytes, sha256: str) -> None:
        raise NotImplementedError

    def _send_copy(self, rel: str, key: str, sha256: str) -> None:
        raise NotImplementedError

    def _finish(self, manifest: dict[str, Any]) -> None:
        raise NotImplementedError

    def _abort(self) -> None:
        """What a failed block leaves: nothing visible (a store may keep sent files to resume)."""

    def _submit(self, rel: str, size: int, sha256: str, send: Callable[[], None]) -> None:
        rel = _inside(rel)
        with self._lock:
            if rel in self.files:
                raise ValueError(f"{self.name}: {rel} added twice")
            self.files[rel] = {"path": rel, "size": size, "sha256": sha256}
        if self.done is not None:
            return
        self._slots.acquire()

        def run() -> None:
            try:
                send()
            finally:
                self._slots.release()

        self._futures.append(self._pool.submit(run))
        self._raise_failed()

    def flush(self) -> None:
        """Wait until every file added so far is sent (a failure is raised here)."""
        for future in self._futures:
            future.result()
        self._futures.clear()

    def _raise_failed(self) -> None:
        for future in [f for f in self._futures if f.done()]:
            future.result()  # the first failure stops the block at once
            self._futures.remove(future)

    def add_file(self, rel: str, path: str | Path, *, remove: bool = False) -> None:
        """Send a local file as `rel` (`remove`: delete the local file once sent)."""
        path = Path(path)
        size, sha = path.stat().st_size, file_sha256(path)

        def send() -> None:
            self._send_file(rel, path, sha)
            if remove:
                path.unlink(missing_ok=True)

        self._submit(rel, size, sha, send)
        if remove and self.done is not None:  # complete already: nothing is sent
            path.unlink(missing_ok=True)

    def add_copy(self, rel: str, key: str, size: int, sha256: str) -> None:
        """An object the store already holds (`key`, e.g. a committed part) as `rel`, copied
        inside the store (nothing passes through this process)."""
        self._submit(rel, size, sha256, lambda: self._send_copy(rel, key, sha256))

    def add_bytes(self, rel: str, data: bytes) -> None:
        sha = hashlib.sha256(data).hexdigest()
        self._submit(rel, len(data), sha, lambda: self._send_bytes(rel, data, sha))

    def __enter__(self) -> OutputWriter:
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        try:
            self._pool.shutdown(wait=True, cancel_futures=error is not None)
            if error is None:
                for future in self._futures:
                    future.result()
        except BaseException:
            self._abort()
            raise
        if error is not None:
            self._abort()
            return
        if self.done is None:
            if not self.files:
                raise UsageError("output", self.name, "is empty; nothing to publish")
            manifest = manifest_document(self.name, list(self.files.values()), self.made_by)
            self._finish(manifest)
            self.done = manifest


def bytes_stream(body: bytes) -> io.BytesIO:
    return io.BytesIO(body)


_bytes_stream = bytes_stream  # the name it had
