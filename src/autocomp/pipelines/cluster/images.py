"""The container images the compiled pipelines name, resolved when a pipeline is built for the
cluster (compile), never when a module is imported: a component names only its image's kind
(`placeholder(kind)`), and `autocomp.pipelines.definitions.builder.Build` puts `image(kind)` in
its place. The rule is the one `make images` and `make push` use too:
- name: $AUTOCOMP_IMAGE_REGISTRY/autocomp-<kind>;
- tag: the package version plus the git commit (`0.1.0-<commit>`, `-dirty` when the files that go
  into an image differ from that commit); inside an image the commit comes from the image itself
  ($AUTOCOMP_GIT_COMMIT, set at build time); a variant of a kind (IMAGE_VARIANTS: the caption
  image's CPU build) is the same name tagged `<tag>-<variant>` (`make images IMAGES=caption
  VARIANT=cpu`) and locked as `<kind>-<variant>`;
- digest: where `make push` wrote images/lock.json (or $AUTOCOMP_IMAGE_LOCK names one), the
  compiled pipelines name each image by the digest that was pushed, never by a mutable tag.

Compiling for a cluster (`check_cluster_images`) refuses images nobody can pull: without the
lock and without $AUTOCOMP_IMAGE_REGISTRY the name would be DEFAULT_REGISTRY's, where no autocomp
image is published; without the lock a `-dirty` tag names an image never pushed. (`make images`
still builds under DEFAULT_REGISTRY for a local engine; the local run needs no image.)

No kfp here (the Makefile imports it with the bare package source).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import warnings
from pathlib import Path

from autocomp import __version__

IMAGE_KINDS = ("core", "gpu", "caption")  # images/imagetool.py: the extras of each
# (kind, variant): images/imagetool.py VARIANTS (the same kind from other extras, tagged -variant)
IMAGE_VARIANTS = (("caption", "cpu"),)
UNRESOLVED = "autocomp-{kind}:unresolved"  # what a component names until a build resolves it
DEFAULT_REGISTRY = "ghcr.io/autocomp"
CHECKOUT = Path(__file__).resolve().parents[4]  # the repository root, when run from a checkout
# What goes into an image (images/Dockerfile's COPY lines, the Dockerfile, the pins).
IMAGE_SOURCES = ("src", "pyproject.toml", "README.md", "images", ":(exclude)images/lock.json")


@functools.cache
def git_commit() -> str | None:
    """The commit the images are built from: $AUTOCOMP_GIT_COMMIT, else the checkout's HEAD
    (12 hex digits, `-dirty` if the image sources differ from it); None outside a checkout."""
    if os.environ.get("AUTOCOMP_GIT_COMMIT"):
        return os.environ["AUTOCOMP_GIT_COMMIT"]
    if not (CHECKOUT / ".git").exists() or not (CHECKOUT / "pyproject.toml").is_file():
        return None
    git = ["git", "-C", str(CHECKOUT)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        diff = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", *IMAGE_SOURCES])
    except (OSError, subprocess.CalledProcessError):
        return None
    return f"{head}-dirty" if diff.returncode else head


def image_tag() -> str:
    commit = git_commit()
    return f"{__version__}-{commit}" if commit else __version__


def lock_path() -> Path:
    return Path(os.environ.get("AUTOCOMP_IMAGE_LOCK") or CHECKOUT / "images" / "lock.json")


@functools.cache
def image_lock() -> dict[str, dict[str, str]]:
    """images/lock.json (kind -> image and digest) as `make push` wrote it; {} with a warning
    when there is none."""
    path = lock_path()
    if not path.is_file():
        warnings.warn(
            f"no image lock at {path}: the pipelines name their images by tag; "
            "`make images push` writes the lock, then compile names them by digest",
            stacklevel=3,
        )
        return {}
    return json.loads(path.read_text())


def image_key(kind: str, variant: str = "") -> str:
    """The lock's key of an image: its kind, or `<kind>-<variant>` (ValueError if unknown)."""
    if kind not in IMAGE_KINDS:
        raise ValueError(f"unknown image kind {kind!r}; one of {IMAGE_KINDS}")
    if variant and (kind, variant) not in IMAGE_VARIANTS:
        raise ValueError(f"unknown variant {variant!r} of the {kind} image; one of "
                         f"{[v for k, v in IMAGE_VARIANTS if k == kind]}")  # fmt: skip
    return f"{kind}-{variant}" if variant else kind


def image_keys() -> tuple[str, ...]:
    """Every image the pipelines may name, as the lock keys it: each kind, then each variant."""
    return (*IMAGE_KINDS, *(image_key(kind, variant) for kind, variant in IMAGE_VARIANTS))


def named_keys(path: str | Path | None = None) -> tuple[str, ...]:
    """The images the compiled pipelines name, as lock keys: every kind, and the variant of each
    score class of the registry (`path`: a registry file of models added) that runs in one."""
    from autocomp.pipelines.cluster.plan import score_groups

    variants = sorted({klass.image for klass in score_groups(path) if klass.image[1]})
    return (*IMAGE_KINDS, *(image_key(kind, variant) for kind, variant in variants))


def tagged(key: str, registry: str, tag: str) -> str:
    """The tag reference of the image a lock key names: `<registry>/autocomp-<kind>:<tag>`,
    `-<variant>` appended to the tag for a variant (what `make images VARIANT=...` builds)."""
    kind, variant = _split(key)
    return f"{registry.rstrip('/')}/autocomp-{kind}:{tag}" + (f"-{variant}" if variant else "")


def _split(key: str) -> tuple[str, str]:
    for kind, variant in IMAGE_VARIANTS:
        if key == image_key(kind, variant):
            return kind, variant
    return key, ""


def key_of(reference: str) -> str | None:
    """The lock key of an image reference that `image()` wrote (None: not an autocomp image)."""
    name = reference.split("@")[0].rsplit("/", 1)[-1]
    kind, _, tag = name.partition(":")
    kind = kind.removeprefix("autocomp-")
    if kind not in IMAGE_KINDS:
        return None
    variant = next((v for k, v in IMAGE_VARIANTS if k == kind and tag.endswith(f"-{v}")), "")
    return image_key(kind, variant)


def image(kind: str, variant: str = "") -> str:
    """The container image of one kind (or its `variant`): by digest where the lock has it,
    else by tag."""
    key = image_key(kind, variant)
    registry = os.environ.get("AUTOCOMP_IMAGE_REGISTRY", DEFAULT_REGISTRY)
    reference = tagged(key, registry, image_tag())
    locked = image_lock().get(key)
    if locked is None:
        return reference
    if locked["image"] != reference:
        warnings.warn(
            f"images/lock.json pins {locked['image']}, this checkout would build {reference}: "
            "the pipelines use the locked image (`make images push` refreshes the lock)",
            stacklevel=2,
        )
    return f"{locked['image']}@{locked['digest']}"


def check_cluster_images() -> None:
    """Refuse to compile for a cluster images that cannot be pulled (see the module's doc)."""
    from autocomp.errors import UsageError
    from autocomp.pipelines.cluster.validate import check_registry

    if os.environ.get("AUTOCOMP_IMAGE_REGISTRY"):
        check_registry("AUTOCOMP_IMAGE_REGISTRY", os.environ["AUTOCOMP_IMAGE_REGISTRY"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        locked = image_lock()
    missing = [key for key in named_keys() if key not in locked]
    if not missing:
        return
    make = " and ".join(sorted({push_command(key) for key in missing}))
    pins = (f"the image lock ({lock_path()}) pins no {', '.join(missing)} image" if locked
            else f"no image lock ({lock_path()})")  # fmt: skip
    if not os.environ.get("AUTOCOMP_IMAGE_REGISTRY"):
        raise UsageError(
            "AUTOCOMP_IMAGE_REGISTRY", "(unset)",
            f"{pins} and no registry: the pipelines would name "
            f"{tagged(missing[0], DEFAULT_REGISTRY, image_tag())}, which is not published; set "
            f"it to the registry you push to and run {make} (it writes the lock)",
        )  # fmt: skip
    if (git_commit() or "").endswith("-dirty"):
        raise UsageError(
            "image tag", image_tag(),
            "the image sources differ from the commit (a -dirty tag) and the lock pins no "
            f"pushed image for {', '.join(missing)}; commit, then {make}",
        )  # fmt: skip


def push_command(key: str) -> str:
    """The make command that builds and pushes the image of a lock key (and locks it)."""
    kind, variant = _split(key)
    if variant:
        return f"`make images push IMAGES={kind} VARIANT={variant}`"
    return "`make images push`"


def references(spec: dict) -> list[str]:
    """Every image a compiled pipeline spec names, sorted."""
    executors = spec.get("deploymentSpec", {}).get("executors", {})
    return sorted({e["container"]["image"] for e in executors.values() if "container" in e})


def placeholder(kind: str, variant: str = "") -> str:
    """The image a component is declared with: its kind (and variant) only, resolved by
    `resolve`."""
    image_key(kind, variant)  # a known kind and variant, else ValueError
    return UNRESOLVED.format(kind=kind) + (f"-{variant}" if variant else "")


def resolve(reference: str) -> str:
    """The real image for a placeholder (`placeholder(kind, variant)`); any other reference
    unchanged."""
    for key in image_keys():
        kind, variant = _split(key)
        if reference == placeholder(kind, variant):
            return image(kind, variant)
    return reference
