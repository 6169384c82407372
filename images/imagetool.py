"""Helpers of the Makefile's image targets (standard library only; run with the host's python3).

extras IMAGE                the extras installed in an image
pip-flags BUILDER DIR       the host's pip settings as build secrets (DIR/pip.conf, DIR/ca.pem)
                            and, for buildah, read-only volumes for local index and wheel
                            folders; prints the build flags
constraints IMAGE           resolve that image's extras (plus the build requirements) alone for
                            the images' Python and write images/constraints/IMAGE.txt (pip's
                            resolver; nothing is installed)
lock KIND REFERENCE DIGEST  record a pushed image in images/lock.json
"""

from __future__ import annotations

import json
import os
import platform
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
LOCK = ROOT / "images" / "lock.json"
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


def pip_flags(builder: str, out: Path) -> list[str]:
    """Write the build's pip.conf and CA bundle into `out`; return the build flags."""
    settings = host_pip_config()
    out.mkdir(parents=True, exist_ok=True)
    lines = ["[global]"]
    cert = settings.get("cert")
    if cert and Path(cert).is_file():
        shutil.copyfile(cert, out / "ca.pem")
        lines.append(f"cert = {SECRET_DIR}/ca.pem")
    else:
        (out / "ca.pem").write_text("")  # the Dockerfile mounts it either way
    folders: list[Path] = []
    for key, value in sorted(settings.items()):
        if key in DROPPED:
            continue
        lines.append(f"{key} = {value}")
        if key in PATH_LISTS:
            folders += [f for f in map(local_folder, value.split()) if f and f not in folders]
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


def constraints_path(image: str) -> Path:
    return ROOT / "images" / "constraints" / f"{image}.txt"


def write_constraints(image: str) -> None:
    check_host_python()
    extras, out = EXTRAS[image], constraints_path(image)
    pins = resolve(extras)
    header = [
        f"# Pins of the image built with the extras [{extras}]: pip's resolution for",
        f"# CPython {'.'.join(map(str, IMAGE_PYTHON))} on Linux x86_64 (`make constraints`).",
    ]
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
    print(f"{LOCK.relative_to(ROOT)}: {kind} = {reference}@{digest}")


def main(argv: list[str]) -> None:
    verb, *args = argv or [""]
    if verb in ("extras", "constraints") and (len(args) != 1 or args[0] not in EXTRAS):
        sys.exit(f"imagetool: {verb} needs one image name, one of {', '.join(EXTRAS)}")
    if verb == "extras":
        print(EXTRAS[args[0]])
    elif verb == "constraints":
        write_constraints(args[0])
    elif verb == "pip-flags" and len(args) == 2:
        print(" ".join(pip_flags(args[0], Path(args[1]))))
    elif verb == "lock" and len(args) == 3:
        write_lock(*args)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
