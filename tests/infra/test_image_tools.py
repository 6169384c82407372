"""The image tooling without building: the host's pip settings become build secrets and
read-only mounts (never files in the image), `make push`'s lock makes compile name images by
digest, the tag is version + commit, and the checked-in pins resolve."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml

from autocomp import __version__
from autocomp.pipelines.cluster import images as components

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "images" / "imagetool.py"
DIGEST = "sha256:" + "ab" * 32

pytestmark = pytest.mark.infra


def tool(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})  # fmt: skip


def test_host_pip_settings_become_secrets_and_read_only_mounts(tmp_path):
    (tmp_path / "mirror" / "simple").mkdir(parents=True)
    (tmp_path / "wheels").mkdir()
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nhost CA\n")
    env = {  # a host with a private file index, a wheel folder, its own CA and a constraint
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_EXTRA_INDEX_URL": f"file://{tmp_path}/mirror/simple https://pypi.example/simple",
        "PIP_FIND_LINKS": str(tmp_path / "wheels"),
        "PIP_CERT": str(tmp_path / "ca.pem"),
        "PIP_CONSTRAINT": "/etc/host-constraints.txt",
        "PIP_DEFAULT_TIMEOUT": "99",
    }
    out = tmp_path / "secrets"
    done = tool("pip-flags", "buildah", str(out), env=env)
    assert done.returncode == 0, done.stderr
    flags = done.stdout.split()
    assert f"--secret=id=pip.conf,src={out}/pip.conf" in flags
    assert f"--secret=id=ca.pem,src={out}/ca.pem" in flags
    # an index at .../simple links its files from the folder above it
    assert f"--volume={tmp_path}/mirror:{tmp_path}/mirror:ro" in flags
    assert f"--volume={tmp_path}/wheels:{tmp_path}/wheels:ro" in flags
    assert len([f for f in flags if f.startswith("--volume")]) == 2  # nothing for the https index
    conf = (out / "pip.conf").read_text()
    assert "cert = /run/secrets/ca.pem" in conf and "default-timeout = 99" in conf
    assert "constraint" not in conf  # each image's own pins rule
    assert (out / "ca.pem").read_text() == (tmp_path / "ca.pem").read_text()

    done = tool("pip-flags", "docker", str(out), env=env)  # docker has no build volumes: said so
    assert "--volume" not in done.stdout and "cannot mount local pip folders" in done.stderr


def test_a_host_without_settings_gets_empty_secrets(tmp_path):
    env = {"PIP_CONFIG_FILE": os.devnull, "PIP_CERT": "", "PIP_FIND_LINKS": ""}
    done = tool("pip-flags", "buildah", str(tmp_path), env=env)
    assert done.returncode == 0 and "--volume" not in done.stdout
    assert (tmp_path / "ca.pem").read_text() == ""
    assert "cert" not in (tmp_path / "pip.conf").read_text()


@pytest.fixture
def fresh_rule(monkeypatch):
    """The image rule with its caches cleared, for the environment each test sets."""
    monkeypatch.setenv("AUTOCOMP_GIT_COMMIT", "0123456789ab")
    monkeypatch.delenv("AUTOCOMP_IMAGE_REGISTRY", raising=False)
    for cached in (components.git_commit, components.image_lock):
        cached.cache_clear()
    yield components
    for cached in (components.git_commit, components.image_lock):
        cached.cache_clear()


def test_tag_is_version_plus_commit_and_a_missing_lock_warns(fresh_rule, monkeypatch, tmp_path):
    monkeypatch.setenv("AUTOCOMP_IMAGE_LOCK", str(tmp_path / "lock.json"))
    with pytest.warns(UserWarning, match="no image lock"):
        assert (
            fresh_rule.image("gpu") == f"ghcr.io/autocomp/autocomp-gpu:{__version__}-0123456789ab"
        )
    with pytest.raises(ValueError, match="unknown image kind 'eval'"):
        fresh_rule.image("eval")


def test_checkout_commit_and_dirty_sources(fresh_rule, monkeypatch):
    monkeypatch.delenv("AUTOCOMP_GIT_COMMIT")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--", "src",
                            "pyproject.toml", "README.md", "images",
                            ":(exclude)images/lock.json"]).returncode  # fmt: skip
    assert fresh_rule.git_commit() == head + ("-dirty" if dirty else "")


def test_the_lock_written_by_push_names_images_by_digest(fresh_rule, monkeypatch, tmp_path):
    lock = tmp_path / "lock.json"
    monkeypatch.setenv("AUTOCOMP_IMAGE_LOCK", str(lock))
    tool_module = runpy.run_path(str(TOOL))
    monkeypatch.setitem(tool_module["write_lock"].__globals__, "LOCK", lock)
    monkeypatch.setitem(tool_module["write_lock"].__globals__, "ROOT", tmp_path)
    reference = f"ghcr.io/autocomp/autocomp-core:{__version__}-0123456789ab"
    tool_module["write_lock"]("core", reference, DIGEST)
    assert json.loads(lock.read_text()) == {"core": {"image": reference, "digest": DIGEST}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a current lock: no warning
        assert fresh_rule.image("core") == f"{reference}@{DIGEST}"
        assert fresh_rule.image("gpu").endswith(f"autocomp-gpu:{__version__}-0123456789ab")

    monkeypatch.setenv("AUTOCOMP_GIT_COMMIT", "fedcba987654")  # the code moved on
    fresh_rule.git_commit.cache_clear()
    with pytest.warns(UserWarning, match="pins .*0123456789ab.* would build .*fedcba987654"):
        assert fresh_rule.image("core") == f"{reference}@{DIGEST}"


def test_a_bad_digest_is_refused(tmp_path):
    done = tool("lock", "core", "ghcr.io/autocomp/autocomp-core:x", "latest")
    assert done.returncode != 0 and "not an image digest" in done.stderr


def test_compile_names_every_image_by_digest_when_locked(tmp_path):
    lock = tmp_path / "lock.json"
    keys = components.image_keys()  # the caption image's CPU variant too (the cpu-vllm class)
    lock.write_text(
        json.dumps(
            {k: {"image": components.tagged(k, "r.example", "v"), "digest": DIGEST} for k in keys}
        )
    )
    env = {**os.environ, "AUTOCOMP_IMAGE_LOCK": str(lock), "AUTOCOMP_GIT_COMMIT": "c0ffee"}
    out = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-m", "autocomp.cli.main", "compile", "--out", str(out)],
                          capture_output=True, text=True, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pins r.example/autocomp-core:v" in done.stderr  # stale: warned, still the locked one
    for path in out.glob("*.yaml"):
        executors = next(yaml.safe_load_all(path.read_text()))["deploymentSpec"]["executors"]
        images = {e["container"]["image"] for e in executors.values()}
        locked = {f"{components.tagged(k, 'r.example', 'v')}@{DIGEST}" for k in keys}
        assert images and images <= locked, images


@pytest.mark.parametrize("kind", ["core"])
def test_the_checked_in_pins_resolve_for_their_image(kind, tmp_path):
    """pip resolves the image's extras and build requirements under its constraint file to
    exactly the pinned set (the gpu and caption pins take minutes; .ci/images resolves those by building)."""
    extras = runpy.run_path(str(TOOL))["EXTRAS"][kind]
    pins_file = ROOT / "images" / "constraints" / f"{kind}.txt"
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-qq",
         "--report", str(report), "--constraint", str(pins_file), f"{ROOT}[{extras}]", "setuptools>=77", "wheel"],
        capture_output=True, text=True, env={**os.environ, "PIP_CONSTRAINT": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    resolved = {(i["metadata"]["name"].lower().replace("_", "-"), i["metadata"]["version"])
                for i in json.loads(report.read_text())["install"]}  # fmt: skip
    pinned = {(line.split("==")[0].lower().replace("_", "-"), line.split("==")[1])
              for line in pins_file.read_text().splitlines() if "==" in line}  # fmt: skip
    assert resolved - {("autocomp", __version__)} == pinned  # with the build requirements
