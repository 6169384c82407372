"""Weights that need the hub fail in seconds with one line when the hub cannot be reached
(issue 34 item 12: it took 108-162 s of the hub client's retries), and nothing is probed for
tiny models, local folders or an offline machine."""

from __future__ import annotations

import socket
import time

import pytest

from autocomp.scoring import LoadFailed, load_or_fail, load_scorer
from autocomp.scoring.hub import check_reachable
from autocomp.scoring.registry import all_models, get_model


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: connections are refused


@pytest.fixture
def no_hub(monkeypatch, tmp_path):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # an empty cache
    monkeypatch.setenv("AUTOCOMP_NETWORK_TIMEOUT", "3")


def _hub_model():
    return next(m for m in all_models().values() if not m.is_tiny and m.kind.hub_repo(m))


def test_an_unreachable_hub_fails_in_seconds_with_one_line(no_hub):
    entry = _hub_model()
    started = time.monotonic()
    with pytest.raises(LoadFailed) as info:
        load_or_fail(load_scorer, entry)
    assert time.monotonic() - started < 10
    text = str(info.value)
    assert "\n" not in text and "cannot be reached" in text and entry.name in text


def test_tiny_local_and_offline_models_are_never_probed(no_hub, monkeypatch, tmp_path):
    check_reachable(get_model("tiny-clip"))  # tiny: random weights, nothing to download
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    check_reachable(_hub_model())  # offline: the backend's loader reads the cache as asked
