"""The S3/MinIO store (autocomp.store.storage's protocol over the `minio` client): outputs as
objects under s3://bucket/prefix/<name>/, manifest object last; objects PUT whole (atomic) and
read by range (`RangeFile`: what pyarrow streams a Parquet file from, with read-ahead for
sequential scans, so a score step reads a benchmark shard by shard without a copy on disk).

Transient failures (connection refused or reset, timeouts, 5xx, SlowDown) are retried with
exponential backoff; the final error is one line naming the store, the endpoint, the key and
the fix. The credentials themselves are never printed.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

from autocomp.errors import UsageError
from autocomp.store.atomic import atomic_path
from autocomp.store.storage import (
    ENDPOINT_ENV,
    KEY_ENVS,
    MANIFEST,
    RESUME_NOTE,
    ObjectInfo,
    OutputWriter,
    StorageError,
    _fetch_verified,
    _inside,
    build_manifest,
    bytes_stream,
    check_key,
    complete_manifest,
    file_sha256,
    manifest_entry,
)
from autocomp.store.transfer import DEFAULT_WORKERS, RangeFile

# S3 error codes of a store that has no room left (MinIO, S3 quotas, SeaweedFS's S3 gateway)
FULL_CODES = {"XMinioStorageFull", "StorageFull", "QuotaExceeded", "XMinioAdminBucketQuotaExceeded",
              "InsufficientStorage", "XAmzContentSHA256Mismatch_Full"}  # fmt: skip
# bytes this process moved to and from S3 stores, and requests made (what the scale simulation
# reports per step; copies inside the store move nothing through the process)
TRAFFIC = {"read": 0, "written": 0, "requests": 0}
_TRAFFIC_LOCK = threading.Lock()


def _count(read: int = 0, written: int = 0) -> None:
    with _TRAFFIC_LOCK:
        TRAFFIC["read"] += read
        TRAFFIC["written"] += written
        TRAFFIC["requests"] += 1


def _transient(exc: BaseException) -> bool:
    from minio.error import S3Error
    from urllib3.exceptions import HTTPError as Urllib3Error

    if isinstance(exc, S3Error):
        return exc.code in {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout"}
    return isinstance(exc, Urllib3Error | ConnectionError | TimeoutError)


class S3Writer(OutputWriter):
    """An S3 output: each file is PUT to its final key as it is added (a file already there
    with the same SHA-256, what an interrupted run uploaded, is not sent again); the manifest
    is PUT last."""

    def __init__(self, store: S3Store, name: str, made_by: dict | None, workers: int) -> None:
        super().__init__(name, made_by, workers)
        self.store = store
        self.done = store.manifest(self.name)
        if self.done is None:
            store.ensure_bucket()

    def _send_file(self, rel: str, path: Path, sha256: str) -> None:
        key = self.store._key(self.name, rel)
        if self.store._retry(f"checking {key}", lambda: self.store._remote_sha(key)) == sha256:
            return
        _count(written=path.stat().st_size)
        self.store._retry(
            f"uploading {key}",
            lambda: self.store.client.fput_object(
                self.store.bucket, key, str(path), metadata={"sha256": sha256},
                part_size=self.store.part_size,
            ),
        )  # fmt: skip

    def _send_bytes(self, rel: str, data: bytes, sha256: str) -> None:
        self.store._put(self.store._key(self.name, rel), data, sha256)

    def _send_copy(self, rel: str, key: str, sha256: str) -> None:
        from minio.commonconfig import REPLACE, CopySource

        target, source = self.store._key(self.name, rel), self.store._key(key)
        if (
            self.store._retry(f"checking {target}", lambda: self.store._remote_sha(target))
            == sha256
        ):
            return
        self.store._retry(
            f"copying {source} to {target}",
            lambda: self.store.client.copy_object(
                self.store.bucket, target, CopySource(self.store.bucket, source),
                metadata={"sha256": sha256}, metadata_directive=REPLACE,
            ),
        )  # fmt: skip

    def _finish(self, manifest: dict[str, Any]) -> None:
        body = json.dumps(manifest, indent=1, sort_keys=True).encode()
        self.store._put(self.store._key(self.name, MANIFEST), body, None, "application/json")


class S3Store:
    """Outputs as objects under s3://bucket/prefix/<name>/, manifest object last."""

    def __init__(
        self,
        uri: str,
        endpoint: str | None = None,
        retries: int = 5,
        backoff: float = 0.5,
        part_size: int = 64 * 1024 * 1024,
        workers: int = DEFAULT_WORKERS,
    ) -> None:
        from minio import Minio
        from urllib3 import PoolManager, Retry, Timeout

        parsed = urlparse(uri)
        self.uri = uri.rstrip("/")
        self.bucket, self.prefix = parsed.netloc, parsed.path.strip("/")
        endpoint = endpoint or os.environ.get(ENDPOINT_ENV)
        missing = [e for e in KEY_ENVS if not os.environ.get(e)]
        if not endpoint or missing:
            what = ENDPOINT_ENV if not endpoint else ", ".join(missing)
            raise UsageError(
                "store",
                uri,
                f"set {what} in the environment (on the cluster: the "
                "autocomp-s3 Secret) to use an S3 store",
            )
        url = urlparse(endpoint if "://" in endpoint else f"https://{endpoint}")
        self.endpoint = endpoint
        self.retries, self.backoff, self.part_size = retries, backoff, part_size
        self.workers = workers
        # autocomp retries itself (with backoff, across requests); urllib3 must not hide failures.
        # One pooled connection per transfer thread.
        from autocomp.network import deadline

        self.deadline = deadline()  # the one network deadline (autocomp.network)
        limit = self.deadline
        http = PoolManager(
            timeout=Timeout(connect=limit.connect, read=limit.read), retries=Retry(total=0),
            maxsize=max(10, 2 * workers),
        )  # fmt: skip
        self.client = Minio(
            url.netloc,
            access_key=os.environ[KEY_ENVS[0]],
            secret_key=os.environ[KEY_ENVS[1]],
            secure=url.scheme == "https",
            http_client=http,
        )
        self._bucket_ok = False

    def _key(self, name: str, path: str = "") -> str:
        return "/".join(p for p in (self.prefix, check_key(name), path) if p)

    def _rel(self, key: str) -> str:
        return key[len(self.prefix) + 1 :] if self.prefix else key

    def _retry(self, what: str, fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except Exception as exc:
                if not _transient(exc):
                    raise self._usage_error(what, exc) from None
                late = time.monotonic() - started >= self.deadline.total  # no retry after it
                if attempt == self.retries or late:
                    raise StorageError(
                        f"store {self.uri} (endpoint {self.endpoint}): {what}: unreachable, "
                        f"failed after {attempt + 1} attempt{'s' if attempt else ''} "
                        f"({type(exc).__name__}: "
                        f"{' '.join(str(exc).split())[:160]}); check {ENDPOINT_ENV} and that the "
                        f"server answers, then {RESUME_NOTE} (the output stays unpublished: no "
                        "manifest)"
                    ) from exc
                time.sleep(self.backoff * 2**attempt)

    def _usage_error(self, what: str, exc: Exception) -> Exception:
        """A non-transient S3 error as one line naming store, endpoint, bucket, key and the fix
        (the credentials themselves are never printed): a full store is a StorageError, a
        setting to fix a UsageError."""
        from minio.error import S3Error

        if not isinstance(exc, S3Error):
            return exc
        where = f"store {self.uri} (endpoint {self.endpoint}, bucket {self.bucket})"
        if exc.code in FULL_CODES:
            return StorageError(
                f"{where}: {what}: {exc.code}: the store is full: free space in bucket "
                f"{self.bucket!r} or give the store more room, then {RESUME_NOTE}"
            )
        fixes = {
            "InvalidAccessKeyId": f"the access key is not known there; check {KEY_ENVS[0]}",
            "SignatureDoesNotMatch": f"the secret key is wrong; check {KEY_ENVS[1]}",
            "AccessDenied": "these credentials may not do this (the store refuses the write "
            "or read); check the bucket policy and the store URI's prefix",
            "NoSuchBucket": f"create bucket {self.bucket!r} or fix the store URI",
            "NoSuchKey": "the object is missing: the output is incomplete; publish it again",
        }
        fix = fixes.get(exc.code or "", "see the S3 server's message")
        return UsageError(where, what, f"{exc.code}: {fix}")

    def ensure_bucket(self) -> None:
        if self._bucket_ok:
            return
        if not self._retry(
            f"checking bucket {self.bucket}", lambda: self.client.bucket_exists(self.bucket)
        ):
            self._retry(
                f"creating bucket {self.bucket}", lambda: self.client.make_bucket(self.bucket)
            )
        self._bucket_ok = True

    def _get(self, key: str, offset: int = 0, length: int = 0) -> bytes | None:
        """An object's bytes (or a range of them); None when it does not exist."""
        from minio.error import S3Error

        def read() -> bytes | None:
            try:
                response = self.client.get_object(self.bucket, key, offset=offset, length=length)
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "NoSuchBucket"):
                    return None
                raise
            try:
                data = response.read()
                _count(read=len(data))
                return data
            finally:
                response.close()
                response.release_conn()

        return self._retry(f"reading {key}", read)

    def _put(self, key: str, data: bytes, sha256: str | None, kind: str = "") -> None:
        # minio types metadata values as str | list[str] | tuple[str]
        metadata: dict[str, str | list[str] | tuple[str]] | None = (
            {"sha256": sha256} if sha256 else None
        )
        _count(written=len(data))
        self._retry(
            f"writing {key}",
            lambda: self.client.put_object(
                self.bucket, key, bytes_stream(data), len(data),
                content_type=kind or "application/octet-stream", metadata=metadata,
            ),
        )  # fmt: skip

    # ------------------------------------------------------------------ outputs

    def manifest(self, name: str) -> dict[str, Any] | None:
        body = self._get(self._key(name, MANIFEST))
        return None if body is None else json.loads(body)

    def _remote_sha(self, key: str) -> str | None:
        from minio.error import S3Error

        try:
            stat = self.client.stat_object(self.bucket, key)
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchBucket"):
                return None
            raise
        meta = {k.lower(): v for k, v in (stat.metadata or {}).items()}
        return meta.get("x-amz-meta-sha256")

    def put(
        self,
        name: str,
        folder: str | Path,
        made_by: dict | None = None,
        on_file: Callable[[str], None] | None = None,
    ) -> dict:
        existing = self.manifest(name)
        if existing is not None:
            return existing
        folder = Path(folder)
        manifest = build_manifest(check_key(name), folder, made_by)
        # one at a time when told of each file (the caller sees them in order)
        with self.writer(name, made_by, workers=1 if on_file else self.workers) as writer:
            for f in manifest["files"]:
                writer.add_file(f["path"], folder / f["path"])
                if on_file:
                    writer.flush()
                    on_file(f["path"])
        return writer.done or manifest

    def get(
        self, name: str, folder: str | Path, only: Callable[[str], bool] | None = None
    ) -> dict[str, Any]:
        """The output's files (`only`: those whose path it accepts) into `folder`, verified."""
        manifest = complete_manifest(self, name)

        def fetch(path: str, target: Path) -> None:
            key = self._key(name, path)
            self._retry(
                f"downloading {key}",
                lambda: self.client.fget_object(self.bucket, key, str(target)),
            )
            _count(read=target.stat().st_size)

        _fetch_verified(manifest, Path(folder), fetch, only)
        return manifest

    def get_file(self, name: str, path: str, target: str | Path) -> Path:
        """One file of a complete output, verified, written atomically to `target`."""
        manifest = complete_manifest(self, name)
        entry = manifest_entry(manifest, path)
        key = self._key(name, _inside(path))
        with atomic_path(target) as tmp:
            self._retry(
                f"downloading {key}", lambda: self.client.fget_object(self.bucket, key, str(tmp))
            )
            _count(read=tmp.stat().st_size)
            if file_sha256(tmp) != entry["sha256"]:
                raise StorageError(f"{path}: content does not match the manifest's SHA-256")
        return Path(target)

    def outputs(self, prefix: str = "") -> list[str]:
        return sorted(
            o.key[: -len(MANIFEST) - 1]
            for o in self.list(prefix.rsplit("/", 1)[0] if "/" in prefix else "")
            if o.key.endswith("/" + MANIFEST) and o.key.startswith(prefix)
        )

    def writer(
        self, name: str, made_by: dict | None = None, workers: int | None = None
    ) -> OutputWriter:
        return S3Writer(self, name, made_by, self.workers if workers is None else workers)

    # ------------------------------------------------------------------ objects

    def write_bytes(self, key: str, data: bytes) -> None:
        import hashlib

        self.ensure_bucket()
        self._put(self._key(key), data, hashlib.sha256(data).hexdigest())

    def read_bytes(self, key: str, missing_ok: bool = False) -> bytes | None:
        """The object's bytes (None for a missing one with `missing_ok`)."""
        body = self._get(self._key(key))
        if body is None and not missing_ok:
            raise UsageError(
                f"store {self.uri} (endpoint {self.endpoint}, bucket {self.bucket})",
                f"reading {self._key(key)}",
                "NoSuchKey: the object is missing: the output is incomplete; run the step "
                "that makes it again",
            )
        return body

    def stat(self, key: str) -> ObjectInfo | None:
        from minio.error import S3Error

        full = self._key(key)

        def look() -> ObjectInfo | None:
            try:
                found = self.client.stat_object(self.bucket, full)
                return ObjectInfo(check_key(key), found.size or 0)
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "NoSuchBucket"):
                    return None
                raise

        return self._retry(f"checking {full}", look)

    def open(self, key: str, size: int | None = None) -> IO[bytes]:
        full = self._key(key)
        if size is None:
            info = self.stat(key)
            if info is None:
                self.read_bytes(key)  # the one-line error of a missing object
            size = info.size  # type: ignore[union-attr]

        def fetch(offset: int, length: int) -> bytes:
            return self._get(full, offset, length) or b""

        return RangeFile(fetch, size, full)  # type: ignore[return-value]

    def list(self, prefix: str) -> list[ObjectInfo]:
        base = "/".join(p for p in (self.prefix, prefix.strip("/")) if p)
        base = f"{base}/" if base else ""

        def scan() -> list[ObjectInfo]:
            found = self.client.list_objects(self.bucket, prefix=base, recursive=True)
            return [ObjectInfo(self._rel(o.object_name), o.size or 0) for o in found]

        try:
            return self._retry(f"listing {base or '/'}", scan)
        except UsageError as exc:
            if "NoSuchBucket" in str(exc):
                return []
            raise

    def delete(self, prefix: str) -> int:
        from minio.deleteobjects import DeleteObject

        keys = [self._key(o.key) for o in self.list(prefix)]
        for start in range(0, len(keys), 1000):
            batch = [DeleteObject(k) for k in keys[start : start + 1000]]

            def remove(batch: list = batch) -> None:
                for error in self.client.remove_objects(self.bucket, batch):
                    raise StorageError(f"store {self.uri}: deleting {error.name}: {error.message}")

            self._retry(f"deleting {prefix}", remove)
        return len(keys)
