"""`open_store`: the store for a URI, a LocalStore (store/local.py) or an S3Store (store/s3.py).
Both are built on store/storage.py (the Store protocol and what every store shares), so the
choice between them lives above the three, here."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from autocomp.errors import UsageError
from autocomp.store.storage import Store


def file_path(uri: str) -> str:
    """The folder of a `file:` URI, refused where it cannot be honoured: a host other than
    localhost (`file://mystore/x` is not the folder mystore/x; the host part is never dropped),
    a relative path (`file:rel`), a query or fragment. `file:///abs/path` and
    `file://localhost/abs/path` name /abs/path (RFC 8089); %-escapes are decoded."""
    from urllib.parse import unquote

    parsed = urlparse(uri)
    fix = "a local store is a folder path or file:///absolute/path"
    if parsed.netloc not in ("", "localhost"):
        raise UsageError("store", uri, f"names the host {parsed.netloc!r}; {fix}")
    if not parsed.path.startswith("/"):
        raise UsageError("store", uri, f"is not an absolute file: URI; {fix}")
    if parsed.query or parsed.fragment or parsed.params:
        raise UsageError("store", uri, f"has a '?', '#' or ';' part; {fix}")
    return unquote(parsed.path)


def local_root(uri: str | Path | None) -> Path | None:
    """The folder of a local store URI (None for none given or an S3 store): what an output
    folder must stay apart from (store/paths.py check_apart), so no verb writes into a store's
    root or a published output there by path."""
    if uri is None or str(uri) == "":
        return None
    text = str(uri)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        return Path(file_path(text))
    if parsed.scheme and len(parsed.scheme) > 1:
        return None
    return Path(text)


def open_store(uri: str | Path, **options: Any) -> Store:
    """The store for a URI: a path or file:// (local folder), s3://bucket/prefix (S3/MinIO)."""
    from autocomp.store.local import LocalStore

    text = str(uri)
    parsed = urlparse(text)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise UsageError("store", text, "must name a bucket: s3://bucket/prefix")
        from autocomp.store.s3 import S3Store

        return S3Store(text, **options)
    if parsed.scheme == "file":
        return LocalStore(file_path(text))
    if parsed.scheme and len(parsed.scheme) > 1:
        raise UsageError("store", text, "must be a folder, file:///folder or s3://bucket/prefix")
    return LocalStore(text)
