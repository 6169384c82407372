from __future__ import annotations

import contextlib
import socket
import textwrap
import threading
from pathlib import Path

import pytest

from autocomp.protocol.family import FAMILY_PATH_ENV, load_family

FIXTURE_FAMILIES = Path(__file__).parent / "fixtures" / "families"


@pytest.fixture(scope="session", autouse=True)
def offline_tiny_cache(tmp_path_factory):
    """Tests never reach the hub, and build tiny weights afresh in a session folder."""
    import os

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["AUTOCOMP_CACHE"] = str(tmp_path_factory.mktemp("autocomp-cache"))


# ----------------------------------------------------------------------------- the fast lane

# Where a test reaches a model's weights: every model a test loads is a tiny one, made (once
# per session) and found through these (HF_HUB_OFFLINE: nothing else can load)
MODEL_LOADERS = (
    ("autocomp.tiny.generation", "ensure"),
    ("autocomp.tiny.scoring", "ensure_open_clip_weights"),
    ("autocomp.tiny.scoring", "ensure_vlm"),
)


@contextlib.contextmanager
def watch_model_loads():
    """The models loaded inside the block (their names, in order), by this process."""
    import importlib

    loaded: list[str] = []
    saved = []
    for module_name, name in MODEL_LOADERS:
        module = importlib.import_module(module_name)
        real = getattr(module, name)

        def watch(*args, _real=real, _name=name, **kwargs):
            loaded.append(f"{_name}({getattr(args[0], 'name', args[0]) if args else ''})")
            return _real(*args, **kwargs)

        saved.append((module, name, real))
        setattr(module, name, watch)
    try:
        yield loaded
    finally:
        for module, name, real in saved:
            setattr(module, name, real)


@pytest.fixture(autouse=True)
def fast_lane_loads_no_model(request):
    """The fast lane (`make test-fast`: not slow, not infra) runs no model: a test that loads
    one and is not marked slow fails, naming the model. (In this process: a model loaded by a
    subprocess the test starts is not seen.)"""
    if request.node.get_closest_marker("slow"):
        yield
        return
    with watch_model_loads() as loaded:
        yield
    if loaded:
        pytest.fail(f"loads a model ({', '.join(loaded)}) but is not marked slow", False)


def _shipped_family(name: str):
    @pytest.fixture
    def fixture():
        return load_family(name)

    return fixture


color = _shipped_family("color")
position = _shipped_family("position")
relative_size = _shipped_family("relative_size")
shape_color = _shipped_family("shape_color")


@pytest.fixture
def fixture_path(monkeypatch):
    """Put tests/fixtures/families (the 'material' family) on the family search path."""
    monkeypatch.setenv(FAMILY_PATH_ENV, str(FIXTURE_FAMILIES))
    return FIXTURE_FAMILIES


@pytest.fixture
def family_dir(tmp_path, monkeypatch):
    """A fresh folder on the family search path; returns a function that writes a family."""
    monkeypatch.setenv(FAMILY_PATH_ENV, str(tmp_path))

    def write(name: str, text: str) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(textwrap.dedent(text))
        return path

    return write


CONTEXTUAL_BLOCK = """
contextual:
  system: Write captions.
  user: "{examples} | {spec}"
  example: "{spec} -> {caption}"
  examples:
    - {objects: [%s], attributes: [%s], caption: "%s"}
"""


def small_attribute_family(name: str = "tiny_attr") -> str:
    """An attribute family small enough to enumerate, with both kinds of conflicts."""
    return (
        f"""
name: {name}
kind: attribute
n: {{min: 1, max: 3}}
objects:
  entries: [cup, tea cup, gloves, lamp, chair]
  never_together: [[lamp, chair]]
attributes:
  entries: [red, blue, gold, yellow, tea]
  never_together: [[gold, yellow]]
caption: {{suffix: " on a white background."}}
"""
        + CONTEXTUAL_BLOCK % ("cup", "red", "A red cup.")
    )


def small_relation_family(name: str = "tiny_rel") -> str:
    return (
        f"""
name: {name}
kind: relation
n: {{min: 2, max: 3}}
objects:
  entries: [cup, tea cup, gloves, lamp, chair]
  never_together: [[lamp, chair]]
relations:
  entries:
    - {{name: above, meaning: above, inverse: under}}
    - {{name: under, meaning: under, inverse: above}}
    - {{name: on top of, meaning: above, inverse: under}}
    - {{name: beside, meaning: beside, inverse: beside}}
caption:
  first: "{{subject}} is {{relation}} {{object}}"
  next: ", which is {{relation}} {{object}}"
  suffix: " on a white background."
"""
        + CONTEXTUAL_BLOCK % ("cup, lamp", "above", "A cup is above a lamp.")
    )


def assert_renders_in_chromium(page: Path, shot: Path) -> None:
    """Render an HTML page in headless Chromium: no console errors, a non-blank screenshot.
    Skipped where Chromium is missing, except in CI (.ci/run installs Debian's chromium)."""
    import os
    import shutil
    import subprocess

    import numpy as np
    from PIL import Image

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (.ci/run does)")
        pytest.skip("chromium is not installed here")
    done = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1280,2000", f"--screenshot={shot}", "--enable-logging=stderr", "--v=0",
         page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
    with Image.open(shot) as image:
        assert image.size == (1280, 2000)
        assert len(np.unique(np.asarray(image.convert("L")))) > 10  # not a blank page


IMAGE_DIGEST = "sha256:" + "ab" * 32
IMAGE_REGISTRY = "registry.test/autocomp"


@contextlib.contextmanager
def pinned_images(folder: Path):
    """compile names pullable images whatever the checkout's state (a dirty working tree
    included): an image lock that pins every image (the three and the caption image's CPU
    variant, as `make push` writes it) and the registry the lock names, for the duration."""
    import json
    import os

    from autocomp.pipelines.cluster import images

    lock = folder / "lock.json"
    lock.write_text(json.dumps({key: {"image": images.tagged(key, IMAGE_REGISTRY,
                                                             images.image_tag()),
                                      "digest": IMAGE_DIGEST}
                                for key in images.image_keys()}))  # fmt: skip
    saved = {k: os.environ.get(k) for k in ("AUTOCOMP_IMAGE_LOCK", "AUTOCOMP_IMAGE_REGISTRY")}
    os.environ["AUTOCOMP_IMAGE_LOCK"] = str(lock)
    os.environ["AUTOCOMP_IMAGE_REGISTRY"] = IMAGE_REGISTRY
    images.image_lock.cache_clear()
    try:
        yield lock
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        images.image_lock.cache_clear()


@pytest.fixture
def silent():
    """A TCP server that accepts every connection and never answers; its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()
