"""Multi-GPU placement: the planner's budget (every registered generative model fits the GPUs its
resource class asks for) and the split loading path (accelerate's device_map with max_memory),
run on CPU with a tiny model split by cpu/disk budgets, as far as accelerate allows here."""

from __future__ import annotations

import dataclasses

import pytest

from autocomp.pipelines.cluster.resources import score_class
from autocomp.scoring.placement import fits, load_options, max_memory, weights_gib
from autocomp.scoring.registry import all_models, get_model


def _card_gib(gpu_gb: int) -> float:
    """The least memory a GPU of a class has (the node affinity asks for > gpu_gb * 1000 MiB)."""
    return gpu_gb * 1000 / 1024


def _generative():
    return [m for m in all_models().values() if m.backend == "transformers_vlm" and not m.is_tiny]


def test_every_paper_mllm_fits_the_gpus_of_its_class():
    checked = []
    for entry in _generative():
        assert entry.params_b, f"{entry.name}: params_b is needed to plan its GPUs"
        cls = score_class(entry.gpus, entry.gpu_memory_gb)
        assert fits(entry, _card_gib(cls.gpu_gb)), (entry.name, weights_gib(entry), cls.name)
        checked.append((entry.name, cls.name))
    assert ("qwen2.5-vl-72b", "2x80gb") in checked and ("qwen3.5-122b-a10b", "4x80gb") in checked
    assert ("internvl3-78b", "4x48gb") in checked


def test_the_planner_says_no_when_the_gpus_are_too_few():
    qwen72 = get_model("qwen2.5-vl-72b")  # 73.4 B params in bf16: about 137 GiB of weights
    assert 136 < weights_gib(qwen72) < 138
    assert not fits(dataclasses.replace(qwen72, gpus=1), _card_gib(80))
    assert not fits(qwen72, _card_gib(48))  # two 48 GB cards hold 84 GiB of weights at most
    assert max_memory(qwen72, [79.6, 79.6, 79.6]) == {0: "73359MiB", 1: "73359MiB"}


def test_one_device_needs_no_device_map():
    assert load_options(get_model("qwen2.5-vl-7b"), "cuda") == {}
    assert load_options(get_model("qwen2.5-vl-72b"), "cpu") == {}


@pytest.mark.slow
def test_a_tiny_model_split_by_budgets_scores_like_the_whole_model(tmp_path):
    from PIL import Image

    from autocomp.scoring import ScoreRequest, load_scorer

    images = {"a": Image.new("RGB", (64, 64), (200, 30, 30))}
    requests = [ScoreRequest("a", c) for c in ("A red cup.", "A blue lamp on a table.")]
    requests.append(ScoreRequest(None, "A red cup."))
    whole = load_scorer("tiny-qwen2.5-vl", device="cpu")
    reference = whole.score(requests, images)
    size = sum(p.numel() * p.element_size() for p in whole.model.parameters())
    for budget, devices in (
        ({"cpu": 2 * size}, {"cpu"}),
        ({"cpu": size // 3, "disk": 2**30}, {"disk"}),  # weights offloaded, loaded per layer
    ):
        split = load_scorer(
            "tiny-qwen2.5-vl", device="cpu", max_memory=budget, offload_folder=str(tmp_path)
        )
        placed = set(getattr(split.model, "hf_device_map", {"": "cpu"}).values())
        assert devices <= placed, (budget, placed)
        got = split.score(requests, images)
        assert max(abs(a - b) for a, b in zip(reference, got)) <= 1e-4
