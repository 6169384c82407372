"""The fast lane runs no model: tests/conftest.py's fast_lane_loads_no_model fails a test that
is not marked slow and loads one (every test model is a tiny one, found through
conftest.MODEL_LOADERS)."""

from __future__ import annotations

from pathlib import Path

import autocomp.tiny.generation as tiny_generation
import autocomp.tiny.scoring as tiny_scoring
from tests.conftest import MODEL_LOADERS, watch_model_loads


def test_a_model_load_is_seen_and_the_loaders_are_restored(monkeypatch):
    monkeypatch.setattr(tiny_generation, "ensure", lambda name, builder: Path(name))
    with watch_model_loads() as loaded:
        assert tiny_generation.ensure("tiny-sd3", "sd3") == Path("tiny-sd3")
    assert loaded == ["ensure(tiny-sd3)"]
    with watch_model_loads() as loaded:
        pass
    assert loaded == []
    assert tiny_generation.ensure("x", "sd3") == Path("x")  # the loader is back as it was


def test_every_loader_watched_exists():
    modules = {"autocomp.tiny.generation": tiny_generation, "autocomp.tiny.scoring": tiny_scoring}
    for module, name in MODEL_LOADERS:
        assert callable(getattr(modules[module], name)), name
