"""KFP lightweight components: one per stage, each a thin wrapper around one autocomp stage
function (no logic here). Images are named by `image(kind)`: the registry comes from
AUTOCOMP_IMAGE_REGISTRY at compile time, the tag is the package version (images/ and the Makefile
use the same rule)."""

from __future__ import annotations

import os

from autocomp import __version__

IMAGE_KINDS = ("core", "generate", "caption", "eval")
DEFAULT_REGISTRY = "ghcr.io/autocomp"


def image(kind: str) -> str:
    """The container image of one kind, tagged with the package version."""
    if kind not in IMAGE_KINDS:
        raise ValueError(f"unknown image kind {kind!r}; one of {IMAGE_KINDS}")
    registry = os.environ.get("AUTOCOMP_IMAGE_REGISTRY", DEFAULT_REGISTRY).rstrip("/")
    return f"{registry}/autocomp-{kind}:{__version__}"
