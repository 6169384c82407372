"""What every pipelines test compiles with (set for tests/pipelines only: package scope): an image lock that pins every image (as
`make push` writes it), so compile names pullable images whatever the checkout's state (a dirty
working tree included), and the registry the lock names."""

from __future__ import annotations

import json

import pytest

from tests.conftest import pinned_images


@pytest.fixture(scope="package", autouse=True)
def image_lock(tmp_path_factory):
    with pinned_images(tmp_path_factory.mktemp("lock")) as lock:
        yield lock


@pytest.fixture(scope="package")
def dist_for(image_lock, tmp_path_factory):
    """`dist_for(backend, gpu_sizes=..., pull_secrets=..., tolerations=...)`: the packages
    compiled with those options (once per test run, in this process)."""
    import warnings

    from autocomp.pipelines.compile import compile_all

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
