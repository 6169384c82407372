"""Weights that must come from the Hugging Face hub and are not in this machine's cache need the
hub: `check_reachable` probes it once, before a backend starts loading, so an unreachable hub
fails in seconds with one line (the network deadline's connect time, autocomp/network.py)
instead of after minutes of the hub client's retries. Tiny models, local folders, an offline
machine (HF_HUB_OFFLINE) and weights already cached are never probed."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from autocomp.network import deadline

if TYPE_CHECKING:
    from autocomp.scoring.registry import ModelEntry

DEFAULT_ENDPOINT = "https://huggingface.co"  # huggingface_hub's own default ($HF_ENDPOINT)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _cached(repo: str, revision: str | None) -> bool:
    """Whether the hub cache holds a snapshot of `repo` (at `revision`)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # no hub client here: the backend's own loader says what is missing
        return True
    try:
        snapshot_download(repo, revision=revision, local_files_only=True)
    except Exception:  # LocalEntryNotFoundError, or a repo id the cache cannot even name
        return False
    return True


def check_reachable(entry: ModelEntry) -> None:
    """Raise OSError (one line) when `entry`'s weights must be downloaded and the hub does not
    accept a connection within the deadline's connect time."""
    repo = entry.kind.hub_repo(entry)
    if not repo or entry.is_tiny or _offline() or Path(repo).exists():
        return
    if _cached(repo, entry.revision):
        return
    endpoint = os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    parsed = urlparse(endpoint)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    limit = deadline().connect
    try:
        socket.create_connection((parsed.hostname or "", port), timeout=limit).close()
    except OSError as exc:
        raise OSError(
            f"{repo} is not in this machine's hub cache and the hub {endpoint} cannot be "
            f"reached within {limit:g} s ({exc.strerror or type(exc).__name__})"
        ) from None
