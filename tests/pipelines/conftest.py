"""What every pipelines test compiles with (set for tests/pipelines only: package scope): an image lock that pins all three images (as
`make push` writes it), so compile names pullable images whatever the checkout's state (a dirty
working tree included), and the registry the lock names."""

from __future__ import annotations

import json
import os

import pytest

DIGEST = "sha256:" + "ab" * 32
REGISTRY = "registry.test/autocomp"


@pytest.fixture(scope="package", autouse=True)
def image_lock(tmp_path_factory):
    from autocomp.pipelines.cluster import images

    lock = tmp_path_factory.mktemp("lock") / "lock.json"
    lock.write_text(json.dumps({kind: {"image": f"{REGISTRY}/autocomp-{kind}:{images.image_tag()}",
                                       "digest": DIGEST} for kind in images.IMAGE_KINDS}))  # fmt: skip
    saved = {k: os.environ.get(k) for k in ("AUTOCOMP_IMAGE_LOCK", "AUTOCOMP_IMAGE_REGISTRY")}
    os.environ["AUTOCOMP_IMAGE_LOCK"] = str(lock)
    os.environ["AUTOCOMP_IMAGE_REGISTRY"] = REGISTRY
    images.image_lock.cache_clear()
    yield lock
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    images.image_lock.cache_clear()


@pytest.fixture(scope="package")
def dist_for(image_lock, tmp_path_factory):
    """`dist_for(backend, gpu_sizes=..., pull_secrets=..., tolerations=...)`: the packages
    compiled with those options (once per test run, in this process)."""
    import warnings

    from autocomp.pipelines.cluster.compile import compile_all

    made: dict = {}

    def compiled(backend: str | None = None, **options):
        key = (backend, json.dumps(options, sort_keys=True, default=list))
        if key not in made:
            out = tmp_path_factory.mktemp(f"dist-{backend or 'default'}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile_all(out, backend, **options)
            made[key] = out
        return made[key]

    return compiled
