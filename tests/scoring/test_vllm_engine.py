"""The vLLM scoring engine (autocomp.scoring.vllm_engine) against the transformers shared-prefix
path (autocomp.scoring.generative), in one process of the `vllm` environment (`make
test-vllm`): the same summed caption log-likelihoods within 1e-4 and the same best caption,
with vLLM's prefix cache on (its cached spans checked, hits into a caption completed by
boundary requests), the prefix/caption tokenisation boundary included, and a prompt longer than
max_model_len refused before scoring.

The tiny Qwen2.5-VL and LLaVA (head_dim 64, images of two sizes, and blind requests) and a tiny
text-only Qwen2 (a merge across the prefix/caption boundary) hold the engine to that equality.
vLLM's multimodal models need torchvision: the lane's environment has PyPI's torch 2.13.0 and
torchvision 0.28.0 pair (the Makefile says why), so these tests never skip there."""

from __future__ import annotations

import math

import pytest
from PIL import Image

from autocomp.errors import UsageError
from autocomp.scoring import ScoreRequest, load_scorer
from autocomp.scoring.registry import ModelEntry, get_model

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

BLOCK = 32  # a small prefix-cache block: captions that share their first words share blocks
SHARED = "A red cup on the left of a blue ball, next to a green cube and a yellow"
CAPTIONS = [
    "A red cup.",
    "\nA caption that starts with a newline",  # the prefix ends with one: the boundary case
    SHARED + " box.",  # these three share whole blocks past the prefix: boundaries
    SHARED + " ball.",
    SHARED + " cone!",
    "A",
    "Two green cubes.",
]
TEXT_RAW = {
    "name": "tiny-qwen2-text-vllm", "title": "Tiny Qwen2 text (random weights)",
    "backend": "transformers_vlm", "engine": "vllm", "score": "loglik",
    "model_class": "Qwen2ForCausalLM", "weights": "tiny", "tiny_config": "qwen2_text_vllm",
    "dtype": "float32", "gpus": 0, "gpu_memory_gb": 0, "trust_remote_code": False,
}  # fmt: skip
TOLERANCE = 1e-4


def _entry(raw: dict) -> ModelEntry:
    fields = {k: v for k, v in raw.items() if k in ModelEntry.__dataclass_fields__}
    return ModelEntry(**fields, raw=dict(raw))


@pytest.fixture(scope="module")
def text_pair():
    entry = _entry(TEXT_RAW)
    engine = load_scorer(entry, device="cpu", block_size=BLOCK)
    reference = load_scorer(entry, device="cpu", engine="transformers")
    return engine, reference


def _assert_same(engine, reference, requests, images) -> tuple[list[float], list[float]]:
    got = engine.score(requests, images)
    want = reference.score(requests, images)
    assert len(got) == len(want) == len(requests)
    for request, a, b in zip(requests, got, want):
        assert math.isfinite(a) and abs(a - b) <= TOLERANCE, (request, a, b)
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault((r.image_key, r.prompt), []).append(i)
    for members in groups.values():  # the same best caption for every image and prompt
        assert max(members, key=lambda i: got[i]) == max(members, key=lambda i: want[i])
    return got, want


def _block_multiple_prompt(engine) -> str:
    """A request prompt whose prefix is a whole number of blocks long (the case where the
    first caption token's log-prob comes from the warm request)."""
    for pad in range(BLOCK):
        prompt = "What is shown?" + " " * pad
        if len(engine._group(None, prompt, ["A"]).expanded) % BLOCK == 0:
            return prompt
    raise AssertionError("no padding makes the prefix a block multiple")


def test_text_scores_equal_the_shared_prefix_path(text_pair):
    engine, reference = text_pair
    before = dict(engine.calls)
    prompts = [None, "What is shown?", _block_multiple_prompt(engine)]
    requests = [ScoreRequest(None, c, p) for p in prompts for c in CAPTIONS]
    _assert_same(engine, reference, requests, {})
    done = {k: engine.calls[k] - before[k] for k in engine.calls}
    assert done["prefix_forwards"] == len(prompts)  # one warm request per prefix
    assert done["candidate_forwards"] == len(requests)
    # the captions sharing SHARED reach into each other's cached blocks: vLLM hands back
    # unwritten log-prob rows for them; boundary requests of the shared heads filled them in
    assert done["boundaries"] > 0 and done["rescored"] == 0


def test_a_boundary_whose_own_hit_reaches_the_caption_is_completed_from_a_shorter_one(
    text_pair, monkeypatch
):
    engine, reference = text_pair
    levels: list[int] = []
    wanted = engine._wanted

    def counted(spans, made):
        found = wanted(spans, made)
        levels.append(len(found))
        return found

    monkeypatch.setattr(engine, "_wanted", counted)
    long = SHARED + " box, under a purple cone and"  # shares three blocks past the prefix
    captions = [long + " x.", long + " y.", long + " z and more words.", SHARED + " cone!"]
    requests = [ScoreRequest(None, c, p) for p in (None, "What is shown?") for c in captions]
    _assert_same(engine, reference, requests, {})
    # boundaries of the shared heads, then (a boundary's own hit in the caption) shorter ones
    assert levels[0] > 0 and levels[1] > 0 and levels[-1] == 0


def test_the_prefix_caption_boundary_is_the_shared_prefix_paths(text_pair):
    engine, _ = text_pair
    caption = CAPTIONS[1]
    group = engine._group(None, None, [caption])
    alone = engine.tokenizer(caption, add_special_tokens=False)["input_ids"]
    prefix_text = engine.tokenizer.decode(group.expanded)
    together = engine.tokenizer(prefix_text + caption, add_special_tokens=False)["input_ids"]
    assert together != group.expanded + alone  # a real boundary case: a merge spans it
    assert group.captions == [alone]  # scored on its own, as the transformers path does


def test_a_prefix_of_whole_blocks_takes_the_first_token_from_the_warm_request(text_pair):
    engine, reference = text_pair
    prompt = _block_multiple_prompt(engine)
    group = engine._group(None, prompt, CAPTIONS)
    engine._warm([group])
    assert group.first is not None and set(group.first) == {c[0] for c in group.captions}
    _assert_same(engine, reference, [ScoreRequest(None, c, prompt) for c in CAPTIONS], {})


def test_a_prompt_longer_than_max_model_len_is_refused_before_scoring(text_pair):
    engine, _ = text_pair
    before = dict(engine.calls)
    long = "a" * (engine.max_model_len + 1)  # one token per byte
    with pytest.raises(UsageError, match="max_model_len"):
        engine.score([ScoreRequest(None, "A red cup."), ScoreRequest(None, long)], {})
    assert engine.calls == before  # nothing ran, not even the short caption


@pytest.mark.parametrize("name", ["tiny-qwen2.5-vl-vllm", "tiny-llava-vllm"])
def test_vlm_scores_equal_the_shared_prefix_path(name):
    entry = get_model(name)
    engine = load_scorer(entry, device="cpu", block_size=BLOCK)
    reference = load_scorer(entry, device="cpu", engine="transformers")
    images = {
        "red": Image.new("RGB", (40, 40), (220, 30, 30)),
        "blue": Image.new("RGB", (56, 40), (20, 40, 230)),
    }
    requests = [ScoreRequest(key, c) for key in images for c in CAPTIONS]
    requests += [ScoreRequest(None, c) for c in CAPTIONS[:3]]  # blind: no image
    _assert_same(engine, reference, requests, images)


def test_an_engine_that_cannot_start_says_why_and_which_setting():
    entry = _entry(TEXT_RAW)
    with pytest.raises(
        UsageError,
        match=r"cannot start \(No available memory for the cache "
        r"blocks.*\); change what it names: the KV cache \(kv_cache_bytes\)",
    ):
        load_scorer(entry, device="cpu", kv_cache_bytes=4096)  # room for no block at all


@pytest.mark.parametrize("name", ["tiny-qwen2.5-vl-vllm", "tiny-llava-vllm"])
def test_without_torchvision_a_multimodal_model_is_refused_in_one_line(name, monkeypatch):
    """The caption image's CPU variant has no torchvision (imagetool.py PRUNE): Qwen2.5-VL's
    processor stops there, and LLaVA's loads (a PIL fallback) but vLLM's llava module imports
    torchvision; both are one line naming where to score instead, before any engine starts."""
    import sys

    for module in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setitem(sys.modules, "torchvision", None)  # import fails, find_spec says None
    with pytest.raises(UsageError, match="no torchvision.*GPU score class.*make vllm-env"):
        load_scorer(get_model(name), device="cpu", block_size=BLOCK)
