"""One contract every scoring backend passes (after diffusers' tests/pipelines/
test_pipelines_common.py): each backend class declares the `Scorer` protocol and implements all
of it, and each registered tiny variant (every backend and engine has one) behaves as the
protocol says -- the score stage relies on nothing else. The vLLM engine's variants carry the
`vllm` marker: they run in the vllm environment's lane (`make test-vllm`)."""

from __future__ import annotations

import inspect

import pytest
from PIL import Image

from autocomp.scoring import Scorer, ScoreRequest, load_scorer
from autocomp.scoring.backends import SHIPPED
from autocomp.scoring.registry import all_models, backend_class

TINY = {name: entry for name, entry in all_models().items() if entry.is_tiny}
MEMBERS = [name for name in dir(Scorer) if not name.startswith("_")]  # the protocol's methods
LONG = "A photo of " + " and ".join(f"a red cup number {i}" for i in range(40)) + "."


ENGINES = [
    (name, engine) for name, b in sorted(SHIPPED.items()) for engine in b.engine_names or [""]
]


def _engine(entry) -> str:  # noqa: ANN001
    return entry.engine or entry.kind.default_engine


def test_every_backend_has_a_tiny_variant_to_hold_to_the_contract():
    assert {entry.backend for entry in TINY.values()} == set(SHIPPED)
    assert {(entry.backend, _engine(entry)) for entry in TINY.values()} == set(ENGINES)


@pytest.mark.parametrize(("backend", "engine"), ENGINES)
def test_each_backend_declares_and_implements_the_whole_protocol(backend, engine):
    cls = backend_class(
        next(e for e in TINY.values() if e.backend == backend and _engine(e) == engine)
    )
    assert Scorer in cls.__mro__  # declared, not only shaped alike
    assert set(MEMBERS) == {"score", "truncated", "token_counts"}
    for name in MEMBERS:
        mine, declared = getattr(cls, name), getattr(Scorer, name)
        assert mine is not declared, f"{cls.__name__}.{name} is the protocol's empty stub"
        assert list(inspect.signature(mine).parameters) == list(
            inspect.signature(declared).parameters
        ), name


def _variant(name: str):  # noqa: ANN202
    if TINY[name].engine == "vllm":
        return pytest.param(name, marks=pytest.mark.vllm)
    return name


@pytest.fixture(scope="module", params=[_variant(name) for name in sorted(TINY)])
def scorer(request):
    if TINY[request.param].engine == "vllm":
        from tests.scoring.test_vllm_engine import needs_torchvision

        needs_torchvision()
    model = load_scorer(request.param, device="cpu")
    assert isinstance(model, Scorer)  # every member present on the instance
    return TINY[request.param], model


@pytest.fixture(scope="module")
def images():
    return {
        "red": Image.new("RGB", (40, 40), (220, 30, 30)),
        "blue": Image.new("RGB", (56, 40), (20, 40, 230)),
    }


CAPTIONS = ["A red cup.", "A blue ball on the left of a cube.", "Two green cubes."]


def _requests() -> list[ScoreRequest]:
    return [ScoreRequest(key, text) for key in ("red", "blue") for text in CAPTIONS]


@pytest.mark.slow
def test_one_float_per_request_in_request_order(scorer, images):
    _, model = scorer
    requests = _requests()
    scores = model.score(requests, images)
    assert len(scores) == len(requests) and all(isinstance(s, float) for s in scores)
    again = model.score(requests[::-1], images)
    assert again == pytest.approx(scores[::-1], abs=1e-4)
    twice = model.score([requests[1], requests[1]], images)
    assert twice[0] == twice[1] == pytest.approx(scores[1], abs=1e-4)
    assert model.score([], images) == []


@pytest.mark.slow
def test_calls_count_the_work_done(scorer, images):
    _, model = scorer
    assert isinstance(model.calls, dict) and model.calls
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in model.calls.items())
    before = sum(model.calls.values())
    model.score(_requests()[:2], images)
    assert sum(model.calls.values()) > before


@pytest.mark.slow
def test_truncated_says_which_captions_the_context_cut(scorer):
    entry, model = scorer
    flags = model.truncated([*CAPTIONS, LONG])
    assert len(flags) == 4 and all(isinstance(f, bool) for f in flags)
    assert flags[:3] == [False, False, False]
    assert flags[3] == (entry.backend == "open_clip")  # CLIP's 77 tokens; a VLM scores it whole


@pytest.mark.slow
def test_token_counts_exist_exactly_for_summed_scores(scorer):
    entry, model = scorer
    before = dict(model.calls)
    counts = model.token_counts(CAPTIONS)
    # no forward pass (a caption the scorer has not seen yet is tokenized: `tokenized` counts it)
    assert {k: v for k, v in model.calls.items() if k != "tokenized"} == {
        k: v for k, v in before.items() if k != "tokenized"
    }
    if entry.score == "loglik":
        assert len(counts) == 3 and all(isinstance(c, int) and c > 0 for c in counts)
        assert counts[1] > counts[0]  # the longer caption has more tokens
    else:
        assert counts is None


@pytest.mark.slow
def test_blind_requests_and_prompts(scorer, images):
    entry, model = scorer
    plain = model.score([ScoreRequest("red", CAPTIONS[0])], images)
    asked = model.score([ScoreRequest("red", CAPTIONS[0], "What is shown?")], images)
    if entry.backend == "open_clip":
        assert asked == pytest.approx(plain, abs=1e-6)  # contrastive models ignore the prompt
        with pytest.raises(ValueError, match="without an image"):
            model.score([ScoreRequest(None, CAPTIONS[0])], images)
    else:
        assert asked != pytest.approx(plain, abs=1e-6)  # the prompt is the prefix
        blind = model.score([ScoreRequest(None, CAPTIONS[0])], {})
        assert len(blind) == 1 and isinstance(blind[0], float)


@pytest.mark.slow
def test_batch_size_reaches_the_backend_and_keeps_the_scores(scorer, images):
    entry, model = scorer
    small = load_scorer(entry, device="cpu", batch_size=2)
    requests = _requests()
    assert small.score(requests, images) == pytest.approx(model.score(requests, images), abs=1e-4)
    batches = {"open_clip": "text_batches", "transformers_vlm": "chunks"}[entry.backend]
    assert small.calls[batches] >= 2  # 3 captions per image, at most 2 per forward
