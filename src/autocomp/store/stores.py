"""`open_store`: the store for a URI, a LocalStore (store/local.py) or an S3Store (store/s3.py).
Both are built on store/storage.py (the Store protocol and what every store shares), so the
choice between them lives above the three, here."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from autocomp.errors import UsageError
from autocomp.store.storage import Store


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
        return LocalStore(parsed.path)
    if parsed.scheme and len(parsed.scheme) > 1:
        raise UsageError("store", text, "must be a folder, file:///folder or s3://bucket/prefix")
    return LocalStore(text)
