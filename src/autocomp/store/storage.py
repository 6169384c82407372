"""Object storage for published outputs: a local folder by default, S3/MinIO through `minio`.

An *output* is a folder of files stored under a name ("benchmarks/color-run1"). It becomes
visible only when complete: the files are written first and a manifest (`_manifest.json`: every
file's path, size and SHA-256, plus who made it) is written last. Readers ignore outputs without a
manifest, and verify every file they fetch against it. A `put` of an output that is already
complete is skipped (the resume rule for killed steps); a `put` interrupted half-way leaves no
manifest, and its re-run uploads only the files that are not there yet (S3 objects carry their
SHA-256 as metadata).

Store URIs: a path or `file:///path` (LocalStore), `s3://bucket/prefix` (S3Store). S3 settings
come from the environment, never from arguments that would end up in compiled pipelines:
`AUTOCOMP_S3_ENDPOINT` (e.g. `http://minio-service.kubeflow:9000`), `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY` (on the cluster: from a Kubernetes Secret). Transient failures
(connection refused or reset, timeouts, 5xx, SlowDown) are retried with exponential backoff; the
final error names the endpoint, the object and what was left unpublished.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from autocomp import __version__
from autocomp.errors import UsageError
from autocomp.store.atomic import atomic_folder, scratch_folder, sweep_stale

MANIFEST = "_manifest.json"
ENDPOINT_ENV = "AUTOCOMP_S3_ENDPOINT"
KEY_ENVS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


class StorageError(RuntimeError):
    """A store operation that failed after its retries; nothing incomplete became visible."""


class Store(Protocol):
    uri: str

    def manifest(self, name: str) -> dict[str, Any] | None: ...
    def put(self, name: str, folder: str | Path, made_by: dict | None = None) -> dict: ...
    def get(self, name: str, folder: str | Path) -> dict[str, Any]: ...
    def outputs(self, prefix: str = "") -> list[str]: ...


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_manifest(name: str, folder: Path, made_by: dict | None) -> dict[str, Any]:
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel == MANIFEST:
            continue
        files.append({"path": rel, "size": path.stat().st_size, "sha256": file_sha256(path)})
    if not files:
        raise UsageError("output folder", str(folder), "is empty; nothing to publish")
    return {"name": name, "files": files, "autocomp_version": __version__, "made_by": made_by or {}}


def _check_name(name: str) -> str:
    parts = name.strip("/").split("/")
    if not name.strip("/") or any(p in ("", ".", "..") for p in parts):
        raise UsageError("output name", name, "must be a relative path like benchmarks/run-1")
    return "/".join(parts)


def _verify(folder: Path, manifest: dict[str, Any]) -> None:
    for f in manifest["files"]:
        if file_sha256(folder / f["path"]) != f["sha256"]:
            raise StorageError(f"{f['path']}: content does not match the manifest's SHA-256")


def _fetch_verified(
    manifest: dict[str, Any], folder: Path, fetch: Callable[[str, Path], None]
) -> None:
    """Fetch every file of an output into a staging folder beside `folder`, verify them all
    against the manifest, and only then move them into place: a tampered or truncated object
    never lands under the output folder."""
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


def _inside(path: str) -> str:
    """A manifest's file path, refused if it could leave the output folder."""
    parts = path.split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise StorageError(f"manifest names an unsafe path {path!r}")
    return path


# ----------------------------------------------------------------------------- local


class LocalStore:
    """Outputs as folders under a root; a finished output is renamed into place atomically."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.uri = self.root.as_uri() if self.root.is_absolute() else str(self.root)

    def manifest(self, name: str) -> dict[str, Any] | None:
        path = self.root / _check_name(name) / MANIFEST
        return json.loads(path.read_text()) if path.is_file() else None

    def put(self, name: str, folder: str | Path, made_by: dict | None = None) -> dict:
        name = _check_name(name)
        existing = self.manifest(name)
        if existing is not None:
            return existing
        manifest = build_manifest(name, Path(folder), made_by)
        target = self.root / name
        sweep_stale(target.parent)
        # replace: a folder there without a manifest is an incomplete earlier attempt
        with atomic_folder(target, replace=True) as tmp:
            shutil.copytree(
                folder, tmp, ignore=shutil.ignore_patterns(MANIFEST), dirs_exist_ok=True
            )
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))
        return manifest

    def get(self, name: str, folder: str | Path) -> dict[str, Any]:
        manifest = self.manifest(name)
        if manifest is None:
            raise UsageError("store", f"{self.uri}/{name}", "holds no complete output by that name")
        source = self.root / _check_name(name)
        _fetch_verified(manifest, Path(folder), lambda p, t: shutil.copyfile(source / p, t))
        return manifest

    def outputs(self, prefix: str = "") -> list[str]:
        if not self.root.is_dir():
            return []
        found = (p.parent.relative_to(self.root).as_posix() for p in self.root.rglob(MANIFEST))
        # a put in progress (or killed) stages under a hidden temporary folder: not output
        visible = (n for n in found if not any(part.startswith(".") for part in n.split("/")))
        return sorted(n for n in visible if n.startswith(prefix))


# ----------------------------------------------------------------------------- S3 / MinIO


def _transient(exc: BaseException) -> bool:
    from minio.error import S3Error
    from urllib3.exceptions import HTTPError as Urllib3Error

    if isinstance(exc, S3Error):
        return exc.code in {"SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout"}
    return isinstance(exc, Urllib3Error | ConnectionError | TimeoutError)


class S3Store:
    """Outputs as objects under s3://bucket/prefix/<name>/, manifest object last."""

    def __init__(
        self,
        uri: str,
        endpoint: str | None = None,
        retries: int = 5,
        backoff: float = 0.5,
        part_size: int = 64 * 1024 * 1024,
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
        # autocomp retries itself (with backoff, across requests); urllib3 must not hide failures
        http = PoolManager(timeout=Timeout(connect=5, read=120), retries=Retry(total=0))
        self.client = Minio(
            url.netloc,
            access_key=os.environ[KEY_ENVS[0]],
            secret_key=os.environ[KEY_ENVS[1]],
            secure=url.scheme == "https",
            http_client=http,
        )

    def _key(self, name: str, path: str = "") -> str:
        return "/".join(p for p in (self.prefix, _check_name(name), path) if p)

    def _retry(self, what: str, fn: Callable[[], Any]) -> Any:
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except Exception as exc:
                if not _transient(exc):
                    raise self._usage_error(what, exc) from None
                if attempt == self.retries:
                    raise StorageError(
                        f"{self.endpoint}: {what} failed after {self.retries + 1} attempts "
                        f"({type(exc).__name__}: {str(exc)[:160]}); the output stays unpublished "
                        "(no manifest): re-run the step to resume"
                    ) from exc
                time.sleep(self.backoff * 2**attempt)

    def _usage_error(self, what: str, exc: Exception) -> Exception:
        """A non-transient S3 error as one line naming endpoint, bucket, key and the fix (the
        credentials themselves are never printed)."""
        from minio.error import S3Error

        if not isinstance(exc, S3Error):
            return exc
        fixes = {
            "InvalidAccessKeyId": f"the access key is not known there; check {KEY_ENVS[0]}",
            "SignatureDoesNotMatch": f"the secret key is wrong; check {KEY_ENVS[1]}",
            "AccessDenied": "these credentials may not do this; check the bucket policy",
            "NoSuchBucket": f"create bucket {self.bucket!r} or fix the store URI",
            "NoSuchKey": "the object is missing: the output is incomplete; publish it again",
        }
        fix = fixes.get(exc.code, "see the S3 server's message")
        where = f"store {self.uri} (endpoint {self.endpoint}, bucket {self.bucket})"
        return UsageError(where, what, f"{exc.code}: {fix}")

    def ensure_bucket(self) -> None:
        if not self._retry(
            f"checking bucket {self.bucket}", lambda: self.client.bucket_exists(self.bucket)
        ):
            self._retry(
                f"creating bucket {self.bucket}", lambda: self.client.make_bucket(self.bucket)
            )

    def manifest(self, name: str) -> dict[str, Any] | None:
        from minio.error import S3Error

        def read() -> dict[str, Any] | None:
            try:
                response = self.client.get_object(self.bucket, self._key(name, MANIFEST))
            except S3Error as exc:
                if exc.code in ("NoSuchKey", "NoSuchBucket"):
                    return None
                raise
            try:
                return json.loads(response.read())
            finally:
                response.close()
                response.release_conn()

        return self._retry(f"reading {self._key(name, MANIFEST)}", read)

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
        manifest = build_manifest(_check_name(name), folder, made_by)
        self.ensure_bucket()
        for f in manifest["files"]:
            key = self._key(name, f["path"])
            if self._retry(f"checking {key}", lambda k=key: self._remote_sha(k)) != f["sha256"]:
                self._retry(
                    f"uploading {key}",
                    lambda k=key, p=f["path"], s=f["sha256"]: self.client.fput_object(
                        self.bucket,
                        k,
                        str(folder / p),
                        metadata={"sha256": s},
                        part_size=self.part_size,
                    ),
                )
            if on_file:
                on_file(f["path"])
        body = json.dumps(manifest, indent=1, sort_keys=True).encode()
        key = self._key(name, MANIFEST)
        self._retry(
            f"writing {key}",
            lambda: self.client.put_object(
                self.bucket, key, _bytes_stream(body), len(body), content_type="application/json"
            ),
        )
        return manifest

    def get(self, name: str, folder: str | Path) -> dict[str, Any]:
        manifest = self.manifest(name)
        if manifest is None:
            raise UsageError("store", f"{self.uri}/{name}", "holds no complete output by that name")

        def fetch(path: str, target: Path) -> None:
            key = self._key(name, path)
            self._retry(
                f"downloading {key}",
                lambda: self.client.fget_object(self.bucket, key, str(target)),
            )

        _fetch_verified(manifest, Path(folder), fetch)
        return manifest

    def outputs(self, prefix: str = "") -> list[str]:
        base = f"{self.prefix}/" if self.prefix else ""

        def scan() -> list[str]:
            names = []
            for obj in self.client.list_objects(self.bucket, prefix=base, recursive=True):
                if obj.object_name.endswith("/" + MANIFEST):
                    names.append(obj.object_name[len(base) : -len(MANIFEST) - 1])
            return names

        return sorted(n for n in self._retry(f"listing {self.uri}", scan) if n.startswith(prefix))


def _bytes_stream(body: bytes) -> Any:
    import io

    return io.BytesIO(body)


def open_store(uri: str | Path, **options: Any) -> Store:
    """The store for a URI: a path or file:// (local folder), s3://bucket/prefix (S3/MinIO)."""
    text = str(uri)
    parsed = urlparse(text)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise UsageError("store", text, "must name a bucket: s3://bucket/prefix")
        return S3Store(text, **options)
    if parsed.scheme == "file":
        return LocalStore(parsed.path)
    if parsed.scheme and len(parsed.scheme) > 1:
        raise UsageError("store", text, "must be a folder, file:///folder or s3://bucket/prefix")
    return LocalStore(text)
