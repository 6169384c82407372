"""Noise (issue 25.9): a tiny model's first build does not warn that it is random (it is meant
to be), and nothing else is silenced; a long cause in the weights error is cut at a word."""

from __future__ import annotations

import logging

import pytest

from autocomp.errors import shorten, weights_error


@pytest.mark.slow  # builds and loads the tiny CLIP
def test_building_a_tiny_open_clip_model_logs_no_random_init_warning(tmp_path, monkeypatch, caplog):
    from autocomp.scoring.registry import get_model
    from autocomp.tiny.scoring import ensure_open_clip_weights

    monkeypatch.setenv("AUTOCOMP_CACHE", str(tmp_path))  # a fresh cache: the model is built
    with caplog.at_level(logging.WARNING):
        path = ensure_open_clip_weights(get_model("tiny-clip"))
        logging.warning("No pretrained weights loaded for model 'ViT-B-32'. Model initialized")
    assert path.is_file() and path.is_relative_to(tmp_path)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["No pretrained weights loaded for model 'ViT-B-32'. Model initialized"]
    assert not logging.getLogger().filters  # the filter is gone after the build


def test_a_long_cause_is_cut_at_a_word_with_an_ellipsis():
    cause = (
        "An error happened while trying to locate the file on the Hub and we cannot find the "
        "requested files in the local cache. Please check your connection and try again."
    )
    cut = shorten(cause)
    assert len(cut) <= 160 and cut.endswith("...") and cut[:-3] in cause
    assert cause.startswith(cut[:-3]) and cause[len(cut) - 3] == " "  # a whole word kept
    assert shorten("short   text\nhere") == "short text here"
    assert shorten("x" * 300) == "x" * 157 + "..."
    error = weights_error("weights of m", "org/m", OSError(cause))
    assert "(OSError: An error happened while" in str(error) and "An err)" not in str(error)
