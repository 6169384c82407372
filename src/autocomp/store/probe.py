"""`probe_store`: what doctor asks of a store, every request a step makes, on one key under the
store's prefix: PutObject, GetObject (the bytes compared), ListBucket under the prefix and
DeleteObject. The first refused request is named (its IAM action, key and the policy statement
that would allow it: store/s3.py); nothing is left behind when the probe gets that far."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from autocomp.errors import UsageError
from autocomp.store.storage import StorageError
from autocomp.store.stores import open_store

PROBE_DIR = "doctor"


@dataclass(frozen=True)
class ProbeResult:
    """The probe's answer: ok, the steps that passed, and the failing step's one line."""

    ok: bool
    passed: tuple[str, ...]
    failure: str = ""


def probe_store(uri: str, **options: object) -> ProbeResult:
    """Put, get, list and delete one object under `uri`'s prefix (see the module doc)."""
    folder = f"{PROBE_DIR}/probe-{uuid.uuid4().hex[:12]}"
    key, body = f"{folder}/probe.txt", b"autocomp doctor probe\n"
    passed: list[str] = []
    try:
        store = open_store(uri, **options)
        store.write_bytes(key, body)
        passed.append(f"put {key}")
        if store.read_bytes(key) != body:
            raise StorageError(f"store {uri}: {key} reads back other bytes than were written")
        passed.append("get")
        if [o.key for o in store.list(folder)] != [key]:
            raise StorageError(f"store {uri}: listing {folder} does not show {key}")
        passed.append("list")
        store.delete(folder)
        passed.append("delete")
    except (UsageError, StorageError) as exc:
        return ProbeResult(False, tuple(passed), " ".join(str(exc).split()))
    return ProbeResult(True, tuple(passed))
