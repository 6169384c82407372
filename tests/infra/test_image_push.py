"""`make push`'s engine (images/imagetool.py push and verify) against a real registry: Debian's
docker-registry (CNCF distribution 2.8) on 127.0.0.1, small images committed with buildah
from scratch, skopeo reading the registry back. What it checks: a push writes the lock with
the digest the registry holds; the same push again changes nothing; a tag the registry holds
with another digest and an unreachable registry each stop with one line and
write no lock; verify passes images named by their locked digest and refuses a lock naming a
digest the registry does not hold. (.ci/images runs the same on the real core image.)"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = [sys.executable, str(ROOT / "images" / "imagetool.py")]
BUILDAH = ["buildah", "--storage-driver", os.environ.get("STORAGE_DRIVER", "vfs")]

pytestmark = [
    pytest.mark.infra,
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("docker-registry", "skopeo", "buildah"))
        or os.geteuid() != 0,
        reason="needs docker-registry, skopeo and buildah (Debian packages) and root",
    ),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path):
    """host:port of a fresh docker-registry, its storage and config in tmp_path."""
    port = _free_port()
    config = tmp_path / "config.yml"
    config.write_text(
        "version: 0.1\nlog: {level: warn, accesslog: {disabled: true}}\n"
        f"storage: {{filesystem: {{rootdirectory: {tmp_path / 'data'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
    )
    server = subprocess.Popen(["docker-registry", "serve", str(config)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    yield f"127.0.0.1:{port}"
    server.terminate()
    server.wait(10)


@pytest.fixture
def image():
    """`image(tag, text)`: a one-file image committed under `tag`, removed afterwards."""
    made = []

    def commit(tag: str, text: str) -> str:
        box = subprocess.run([*BUILDAH, "from", "scratch"], capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
        mount = subprocess.run([*BUILDAH, "mount", box], capture_output=True, text=True,
                               check=True).stdout.strip()  # fmt: skip
        Path(mount, "what").write_text(text)
        made.append(subprocess.run([*BUILDAH, "commit", "--quiet", "--rm", box, tag],
                                   check=True, capture_output=True, text=True).stdout.strip())  # fmt: skip
        return tag

    yield commit
    for image_id in made:  # by id: a tag committed twice leaves the first image untagged
        subprocess.run([*BUILDAH, "rmi", "--force", image_id], capture_output=True)


def _tool(*args: str, lock: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "AUTOCOMP_IMAGE_LOCK": str(lock), "REGISTRY_TLS_VERIFY": "false"}
    return subprocess.run([*TOOL, *args], capture_output=True, text=True, env=env)


def _held(reference: str) -> str:
    return subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--no-tags", "--format",
                           "{{.Digest}}", f"docker://{reference}"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip


def test_a_push_locks_the_digest_the_registry_holds_and_verify_checks_it(registry, image, tmp_path):
    lock = tmp_path / "lock.json"
    tag = image(f"{registry}/autocomp/autocomp-core:0.1.0-abc", "core\n")
    done = _tool("push", "buildah", str(tmp_path / "work"), f"core={tag}", lock=lock)
    assert done.returncode == 0, done.stderr
    digest = json.loads(lock.read_text())["core"]["digest"]
    assert json.loads(lock.read_text()) == {"core": {"image": tag, "digest": digest}}
    assert _held(tag) == digest and f"pushed {tag}@{digest}" in done.stdout
    # the same image again: nothing moves
    again = _tool("push", "buildah", str(tmp_path / "work"), f"core={tag}", lock=lock)
    assert again.returncode == 0 and json.loads(lock.read_text())["core"]["digest"] == digest

    dist = tmp_path / "dist"
    (dist / "jobs").mkdir(parents=True)
    gpu = f"{registry}/autocomp/autocomp-gpu:0.1.0-abc"
    (dist / "p.yaml").write_text(f"a:\n  image: {tag}@{digest}\nb:\n  image: {gpu}\n")
    (dist / "jobs" / "j.yaml").write_text(f"containers:\n- image: {tag}@{digest}\n")
    done = _tool("verify", str(dist), "core", lock=lock)
    assert done.returncode == 0, done.stderr
    assert f"resolves by digest: {tag}@{digest}" in done.stdout
    assert f"not pushed in this run (gpu): {gpu}" in done.stdout
    # a lock naming a digest the registry does not hold, and a reference by tag: refused
    other = "sha256:" + "0" * 64
    lock.write_text(json.dumps({"core": {"image": tag, "digest": other}}))
    (dist / "p.yaml").write_text(f"a:\n  image: {tag}@{other}\n")
    (dist / "jobs" / "j.yaml").unlink()
    done = _tool("verify", str(dist), "core", lock=lock)
    assert done.returncode == 1 and "the registry does not hold it" in done.stderr
    assert done.stderr.count("\n") == 1
    (dist / "p.yaml").write_text(f"a:\n  image: {tag}\n")
    done = _tool("verify", str(dist), "core", lock=lock)
    assert done.returncode == 1 and "not the locked" in done.stderr


def test_a_refused_push_is_one_line_and_writes_no_lock(registry, image, tmp_path):
    lock = tmp_path / "lock.json"
    work = str(tmp_path / "work")
    tag = image(f"{registry}/autocomp/autocomp-core:0.1.0-abc", "one build\n")
    assert _tool("push", "buildah", work, f"core={tag}", lock=lock).returncode == 0
    first = lock.read_text()
    # the same tag, another build: the registry keeps the first, the lock is untouched
    image(tag, "another build of the same commit\n")
    gpu = image(f"{registry}/autocomp/autocomp-gpu:0.1.0-abc", "gpu\n")
    done = _tool("push", "buildah", work, f"gpu={gpu}", f"core={tag}", lock=lock)
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "the registry holds this tag with another digest" in done.stderr
    assert lock.read_text() == first  # gpu was pushed, but nothing is locked
    assert _held(tag) == json.loads(first)["core"]["digest"]
    # nothing answers at that address
    gone = f"127.0.0.1:{_free_port()}/autocomp/autocomp-core:0.1.0-abc"
    image(gone, "x\n")
    done = _tool("push", "buildah", work, f"core={gone}", lock=tmp_path / "none.json")
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "refused or did not answer" in done.stderr and not (tmp_path / "none.json").exists()
