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
from autocomp.store.s3uri import parse_s3_uri, refusal, s3_region
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
    parse_manifest,
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
    from minio.error import InvalidResponseError, S3Error
    from urllib3.exceptions import HTTPError as Urllib3Error

    if isinstance(exc, S3Error):
        return exc.code in {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout"}
    if isinstance(exc, InvalidResponseError):  # a 5xx without an S3 body (a proxy's 502/503)
        return getattr(exc, "_code", 0) >= 500
    return isinstance(exc, Urllib3Error | ConnectionError | TimeoutError)


def _brief(exc: BaseException) -> str:
    """An exception as a short phrase for an error line (one line, at most 160 characters)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:160]}"


class S3Writer(OutputWriter):
    """An S3 output: each file is PUT to its final key as it is added (a file already there
    with the same SHA-256, what an interrupted run uploaded, is not sent again); the manifest
    is PUT last."""

    def __init__(self, store: S3Store, name: str, made_by: dict | None, workers: int) -> None:
        super().__init__(name, made_by, workers)
        self.store = store
        self.done = store.manifest(self.name)  # no bucket check: a missing bucket is the
        # first write's error (least privilege: the keys may hold only objects under a prefix)

    def _send_file(self, rel: str, path: Path, sha256: str) -> None:
        key = self.store._key(self.name, rel)
        if self.store._remote_sha(key) == sha256:
            return
        _count(written=path.stat().st_size)
        self.store._retry(
            f"uploading {key}",
            lambda: self.store.client.fput_object(
                self.store.bucket, key, str(path), metadata={"sha256": sha256},
                part_size=self.store.part_size,
            ),
            "s3:PutObject", key,
        )  # fmt: skip

    def _send_bytes(self, rel: str, data: bytes, sha256: str) -> None:
        self.store._put(self.store._key(self.name, rel), data, sha256)

    def _send_copy(self, rel: str, key: str, sha256: str) -> None:
        from minio.commonconfig import REPLACE, CopySource

        target, source = self.store._key(self.name, rel), self.store._key(key)
        if self.store._remote_sha(target) == sha256:
            return
        # CopyObject: s3:PutObject on the target and s3:GetObject on the source (both under
        # the store's prefix); nothing passes through this process
        self.store._retry(
            f"copying {source} to {target}",
            lambda: self.store.client.copy_object(
                self.store.bucket, target, CopySource(self.store.bucket, source),
                metadata={"sha256": sha256}, metadata_directive=REPLACE,
            ),
            "s3:PutObject", target,
        )  # fmt: skip

    def _finish(self, manifest: dict[str, Any]) -> None:
        body = json.dumps(manifest, indent=1, sort_keys=True).encode()
        self.store._put(self.store._key(self.name, MANIFEST), body, None, "application/json")


class S3Store:
    """Outputs as objects under s3://bucket/prefix/<name>/, manifest object last. Only
    object-level requests under the prefix (least privilege, docs/cluster.md "The store"):
    PutObject (multipart for large files), GetObject/HeadObject, CopyObject inside the prefix,
    DeleteObject one key at a time, ListObjectsV2 with a prefix under the store's; never a
    bucket-level call (HeadBucket, CreateBucket, GetBucketLocation, DeleteObjects)."""

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

        self.bucket, self.prefix = parse_s3_uri(uri)
        self.uri = f"s3://{self.bucket}/{self.prefix}".rstrip("/")
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
        if url.scheme not in ("http", "https") or not url.hostname:
            raise UsageError(ENDPOINT_ENV, endpoint, "must be http(s)://host[:port]")
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
            region=s3_region(url.hostname),
            http_client=http,
        )

    def _key(self, name: str, path: str = "") -> str:
        return "/".join(p for p in (self.prefix, check_key(name), path) if p)

    def _rel(self, key: str) -> str:
        return key[len(self.prefix) + 1 :] if self.prefix else key

    def _retry(self, what: str, fn: Callable[[], Any], action: str = "", key: str = "") -> Any:
        """`fn` (one S3 request, `action` on `key` in IAM's words) with retries of what may
        pass, none once the network deadline has passed; the final failure is one line (see
        _usage_error)."""
        started = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except Exception as exc:
                if not _transient(exc):
                    raise self._usage_error(what, exc, action, key) from None
                late = time.monotonic() - started >= self.deadline.total  # no retry after it
                if attempt == self.retries or late:
                    raise StorageError(
                        f"store {self.uri} (endpoint {self.endpoint}): {what}: unreachable or "
                        f"failing, failed after {attempt + 1} attempt{'s' if attempt else ''} "
                        f"({_brief(exc)}); check {ENDPOINT_ENV} and that the server answers, then "
                        f"{RESUME_NOTE} (the output stays unpublished: no manifest)"
                    ) from exc
                time.sleep(self.backoff * 2**attempt)

    def _usage_error(self, what: str, exc: Exception, action: str = "", key: str = "") -> Exception:
        """A non-transient S3 error as one line naming store, endpoint, bucket, key and the fix
        (the credentials themselves are never printed): a full store or an answer that is not
        S3 is a StorageError, a setting to fix a UsageError. A refused request names the IAM
        action, the key and the policy statement that would allow it."""
        from minio.error import S3Error

        where = f"store {self.uri} (endpoint {self.endpoint}, bucket {self.bucket})"
        if not isinstance(exc, S3Error):
            if isinstance(exc, UsageError | StorageError):
                return exc
            return StorageError(
                f"{where}: {what}: the server's answer is not an S3 answer ({_brief(exc)}); "
                f"check that {ENDPOINT_ENV} names the S3 API port of the store"
            )
        if exc.code in FULL_CODES:
            return StorageError(
                f"{where}: {what}: {exc.code}: the store is full: free space in bucket "
                f"{self.bucket!r} or give the store more room, then {RESUME_NOTE}"
            )
        if exc.code == "AccessDenied" and action:
            return UsageError(
                where, what, f"AccessDenied: {refusal(self.bucket, self.prefix, action, key)}"
            )
        fixes = {
            "InvalidAccessKeyId": f"the access key is not known there; check {KEY_ENVS[0]}",
            "SignatureDoesNotMatch": f"the secret key is wrong; check {KEY_ENVS[1]}",
            "AccessDenied": "these credentials may not do this; check the bucket policy and "
            "the store URI's prefix",
            "NoSuchBucket": f"bucket {self.bucket!r} does not exist: autocomp never creates "
            "buckets; create it (or fix the store URI) and give these keys access to it",
            "NoSuchKey": "the object is missing: the output is incomplete; publish it again",
        }
        fix = fixes.get(exc.code or "", "see the S3 server's message")
        return UsageError(where, what, f"{exc.code}: {fix}")

    def _get(self, key: str, offset: int = 0, length: int = 0) -> bytes | None:
        """An object's bytes (or a range of them); None when it does not exist."""
        from minio.error import S3Error

        def read() -> bytes | None:
            try:
                response = self.client.get_object(self.bucket, key, offset=offset, length=length)
            except S3Error as exc:
                if exc.code == "NoSuchKey":
                    return None
                raise
            try:
                data = response.read()
                _count(read=len(data))
                return data
            finally:
                response.close()
                response.release_conn()

        return self._retry(f"reading {key}", read, "s3:GetObject", key)

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
            "s3:PutObject", key,
        )  # fmt: skip

    # ------------------------------------------------------------------ outputs

    def manifest(self, name: str) -> dict[str, Any] | None:
        key = self._key(name, MANIFEST)
        body = self._get(key)
        return None if body is None else parse_manifest(body, f"{self.uri}/{name}")

    def _head(self, key: str) -> Any:
        """HeadObject (s3:GetObject): the object's stat, None when it does not exist."""
        from minio.error import S3Error

        def look() -> Any:
            try:
                return self.client.stat_object(self.bucket, key)
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "NoSuchObject"):
                    return None
                raise

        return self._retry(f"checking {key}", look, "s3:GetObject", key)

    def _remote_sha(self, key: str) -> str | None:
        stat = self._head(key)
        if stat is None:
            return None
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
                "s3:GetObject", key,
            )  # fmt: skip
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
                f"downloading {key}", lambda: self.client.fget_object(self.bucket, key, str(tmp)),
                "s3:GetObject", key,
            )  # fmt: skip
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
        found = self._head(self._key(key))
        return None if found is None else ObjectInfo(check_key(key), found.size or 0)

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
        """ListObjectsV2 with a prefix under the store's (never the bucket's root, unless the
        store is the whole bucket)."""
        base = "/".join(p for p in (self.prefix, prefix.strip("/")) if p)
        base = f"{base}/" if base else ""

        def scan() -> list[ObjectInfo]:
            found = self.client.list_objects(self.bucket, prefix=base, recursive=True)
            return [ObjectInfo(self._rel(o.object_name), o.size or 0) for o in found]

        return self._retry(f"listing {base or '/'}", scan, "s3:ListBucket", base)

    def delete(self, prefix: str) -> int:
        """Every object under `prefix`, one DeleteObject at a time (never DeleteObjects, the
        bulk request: SeaweedFS 4.00, multi-user KFP 2.15/2.16's store, checks it as a write
        on the bucket itself, `s3api_server.go:322` and `auth_credentials.go:485-496`), the
        manifests first: an interrupted delete leaves outputs invisible, never incomplete and
        visible."""
        keys = sorted((self._key(o.key) for o in self.list(prefix)),
                      key=lambda k: (not k.endswith("/" + MANIFEST), k))  # fmt: skip
        for key in keys:
            self._remove(key)
        return len(keys)

    def _remove(self, key: str) -> None:
        self._retry(
            f"deleting {key}", lambda: self.client.remove_object(self.bucket, key),
            "s3:DeleteObject", key,
        )  # fmt: skip
