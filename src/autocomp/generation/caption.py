"""The caption stage: a Contextual caption for every concept, from an LLM, checked and retried.

Engines (one interface, `Captioner.generate(prompts, seeds) -> replies`):
- `transformers`: local generation with the registry's model class (batched, left-padded).
  Sampling draws from one torch generator per batch, seeded from the batch's concept seeds, so a
  re-run with the same shards and batch size gives the same replies.
- `vllm`: the cluster engine (generation/vllm_engine.py; the `vllm` extra, its own image).
  Every request carries its own seed, so replies do not depend on batching at all.
Temperature 0 is greedy decoding in both (the two then write the same captions: the vllm lane).

Protocol (protocol/contextual.py): the paper's prompt; each reply normalised and checked; up to
`max_attempts` (3) tries per concept, failed concepts retried together; a concept that fails every
try is dropped from both conditions. Every attempt, its seed and its verdict go to the
`caption_attempts` table. `fallback="minimal"` keeps dropped concepts with their Minimal caption
as the Contextual one, marked `status = "fallback"` (for pipeline tests with random-weight LLMs,
whose replies never pass; never for a benchmark).

Outputs (a folder of shards, autocomp.store.shards):
    captions-*.parquet          concept columns, then contextual_caption (null if dropped),
                                status (accepted | dropped | fallback), attempts (int8)
    caption_attempts-*.parquet  concept_id, attempt, seed, reply, caption, verdict, detail
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from autocomp.config import CaptionConfig
from autocomp.devices import check_device, select_device, select_dtype
from autocomp.errors import UsageError
from autocomp.generation.registry import (
    GenerationModel,
    check_settings,
    get_generation_model,
    weights_error,
)
from autocomp.generation.vllm_engine import VllmCaptioner
from autocomp.protocol.concepts import check_concept_row
from autocomp.protocol.contextual import MAX_ATTEMPTS, Messages, build_prompt, check_caption
from autocomp.protocol.family import load_family
from autocomp.store.catalog.schemas import ATTEMPTS_SCHEMA, CAPTIONS_SCHEMA, CONCEPTS_SCHEMA
from autocomp.store.shards import (
    check_shard_args,
    prepare_folder,
    shard_of,
    shard_path,
    unfinished,
)
from autocomp.store.storage import file_sha256
from autocomp.store.tables import (
    open_parquet,
    provenance,
    read_rows,
    require_columns,
    write_table,
)

ENGINES = ("transformers", "vllm")
FALLBACKS = (None, "minimal")


class Captioner(Protocol):
    settings: dict[str, Any]

    def generate(self, prompts: Sequence[Messages], seeds: Sequence[int]) -> list[str]:
        """One reply per prompt, in order."""
        ...


def attempt_seed(seed: int, concept_id: str, attempt: int) -> int:
    """The sampling seed of one attempt (63-bit, stable everywhere)."""
    digest = hashlib.sha256(f"autocomp/caption/{seed}/{concept_id}/{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


# ----------------------------------------------------------------------------- engines


class TransformersCaptioner:
    """Batched sampling with transformers (`generate`), the local engine."""

    def __init__(self, entry: GenerationModel, device: str | None = None, **overrides: Any) -> None:
        import transformers

        self.entry = entry
        self.settings = {**entry.settings, **overrides}
        self.device = select_device(device)
        dtype = select_dtype(entry.dtype, self.device)
        source = entry.source()
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(source)
            model_class = getattr(transformers, entry.model_class or "AutoModelForCausalLM")
            self.model = model_class.from_pretrained(source, dtype=dtype).to(self.device).eval()
        except (OSError, ValueError) as exc:
            raise weights_error("captioner", entry, exc) from exc
        self.tokenizer.padding_side = "left"

    def generate(self, prompts: Sequence[Messages], seeds: Sequence[int]) -> list[str]:
        import torch

        encoded: Any = self.tokenizer.apply_chat_template(  # return_dict=True: a BatchEncoding
            list(prompts),
            add_generation_prompt=True,
            return_tensors="pt",
            padding=True,
            return_dict=True,
        )
        inputs = {k: v.to(self.device) for k, v in encoded.items()}
        torch.manual_seed(batch_seed(seeds))
        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                **sampling(self.settings),
                max_new_tokens=self.settings["max_new_tokens"],
                pad_token_id=self.tokenizer.pad_token_id,
            )
        new = out[:, inputs["input_ids"].shape[1] :]
        return self.tokenizer.batch_decode(new, skip_special_tokens=True)


def sampling(settings: dict[str, Any]) -> dict[str, Any]:
    """transformers' sampling keywords: temperature 0 is greedy decoding, as in vLLM."""
    if settings["temperature"] == 0:
        return {"do_sample": False, "temperature": None, "top_p": None}
    return {"do_sample": True, "temperature": settings["temperature"], "top_p": settings["top_p"]}


def batch_seed(seeds: Sequence[int]) -> int:
    digest = hashlib.sha256(",".join(map(str, seeds)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


ENGINE_CLASSES: dict[str, type] = {"transformers": TransformersCaptioner, "vllm": VllmCaptioner}


def load_captioner(
    name: str, engine: str = "transformers", device: str | None = None, **overrides: Any
) -> Captioner:
    if engine not in ENGINES:
        raise UsageError("engine", engine, f"must be one of {', '.join(ENGINES)}")
    entry = get_generation_model("captioner", name)
    return ENGINE_CLASSES[engine](entry, device=device, **overrides)


# ----------------------------------------------------------------------------- protocol


def caption_rows(
    rows: list[dict[str, Any]],
    captioner: Captioner,
    seed: int,
    max_attempts: int = MAX_ATTEMPTS,
    fallback: str | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Contextual captions for concept rows: (caption rows, attempt rows)."""
    families = {name: load_family(name) for name in {r["family"] for r in rows}}
    results: list[dict[str, Any]] = [
        {**r, "contextual_caption": None, "status": "dropped", "attempts": 0} for r in rows
    ]
    attempts: list[dict[str, Any]] = []
    pending = list(range(len(rows)))
    for number in range(1, max_attempts + 1):
        if not pending:
            break
        prompts, seeds = [], []
        for i in pending:
            r = rows[i]
            prompts.append(build_prompt(families[r["family"]], r["objects"], r["attributes"]))
            seeds.append(attempt_seed(seed, r["concept_id"], number))
        replies = captioner.generate(prompts, seeds)
        still = []
        for i, s, reply in zip(pending, seeds, replies):
            r = rows[i]
            verdict = check_caption(families[r["family"]], r["objects"], r["attributes"], reply)
            attempts.append(
                {
                    "concept_id": r["concept_id"],
                    "attempt": number,
                    "seed": s,
                    "reply": reply,
                    "caption": verdict.caption,
                    "verdict": verdict.verdict,
                    "detail": verdict.detail,
                }
            )
            results[i]["attempts"] = number
            if verdict.verdict == "accepted":
                results[i].update(contextual_caption=verdict.caption, status="accepted")
            else:
                still.append(i)
        pending = still
    if fallback == "minimal":
        for i in pending:
            results[i].update(contextual_caption=rows[i]["minimal_caption"], status="fallback")
    return results, attempts


def check_config(config: CaptionConfig) -> GenerationModel:
    """The caption settings are valid (before any work; the pipelines check their parameters
    with it too); returns the captioner's registry entry."""
    if config.fallback not in FALLBACKS:
        raise UsageError("fallback", config.fallback, "must be 'minimal' or not given")
    if config.engine not in ENGINES:
        raise UsageError("engine", config.engine, f"must be one of {', '.join(ENGINES)}")
    entry = get_generation_model("captioner", config.captioner)
    check_settings(entry, config.settings)
    if config.batch_size < 1:
        raise UsageError("batch_size", config.batch_size, "must be at least 1")
    check_device(config.device)
    check_shard_args(None, config.num_shards)
    return entry


def caption_stage(
    concepts: str | Path,
    out: str | Path,
    config: CaptionConfig,
    shard: int | None = None,
    progress: Callable[[int], None] | None = None,
    load: Callable[[], Captioner] | None = None,
) -> dict[str, int]:
    """`autocomp caption`: the Contextual captions of the selected shards' concepts.

    Args:
        concepts: a concepts table (`autocomp sample`).
        out: the captions folder (`captions-i-of-K.parquet`, `caption_attempts-*`); finished
            shards made with the same configuration are skipped.
        config: the captioner, engine, seed, shards and its settings (CaptionConfig).
        shard: one shard to caption (a worker of K); None: every shard.
        progress: called with the concepts of each batch done.
        load: builds the captioner (tests); default: the registered one.

    Returns:
        Counts: concepts, accepted, dropped, fallback, attempts, skipped shards.
    """
    entry = check_config(config)
    shards = check_shard_args(shard, config.num_shards)
    source = open_parquet(concepts, "concepts")
    require_columns(
        concepts,
        source.schema_arrow,
        tuple(CONCEPTS_SCHEMA.names),
        "give a concepts table (autocomp sample)",
        option="concepts",
    )
    folder = prepare_folder(out)
    record = {
        "captioner": entry.record(config.settings),
        "engine": config.engine,
        # the vLLM engine's arguments (generation/models.yaml `vllm`) change its numbers too
        **({"vllm": entry.vllm or {}} if config.engine == "vllm" else {}),
        "seed": config.seed,
        "max_attempts": MAX_ATTEMPTS,
        "fallback": config.fallback,
        "input_sha256": file_sha256(Path(concepts)),
        "num_shards": config.num_shards,
    }
    table = read_rows(source, concepts, "concepts", CONCEPTS_SCHEMA.names)
    for i, row in enumerate(table.to_pylist()):
        where = f"concepts row {i} ({row['concept_id']})"
        check_concept_row(load_family(row["family"]), row, where, "minimal_caption")
    todo = unfinished(folder, "captions", shards, config.num_shards, record)
    summary = {
        "concepts": 0,
        "accepted": 0,
        "dropped": 0,
        "fallback": 0,
        "attempts": 0,
        "skipped_shards": len(shards) - len(todo),
    }
    if not todo:
        return summary
    model = (
        load()
        if load
        else load_captioner(config.captioner, config.engine, config.device, **config.settings)
    )
    rows = table.to_pylist()
    for s in todo:
        mine = [r for r in rows if shard_of(r["concept_id"], config.num_shards) == s]
        results: list[dict[str, Any]] = []
        attempts: list[dict[str, Any]] = []
        for start in range(0, len(mine), config.batch_size):
            got, tried = caption_rows(
                mine[start : start + config.batch_size],
                model,
                config.seed,
                fallback=config.fallback,
            )
            results += got
            attempts += tried
            if progress:
                progress(len(got))
        document = provenance("captions", config=record, shard=s)
        write_table(
            pa.Table.from_pylist(attempts, ATTEMPTS_SCHEMA),
            shard_path(folder, "caption_attempts", s, config.num_shards),
            provenance("caption_attempts", config=record, shard=s),
        )
        # the captions shard is written last: its presence marks the shard finished
        write_table(
            pa.Table.from_pylist(results, CAPTIONS_SCHEMA),
            shard_path(folder, "captions", s, config.num_shards),
            document,
        )
        summary["concepts"] += len(results)
        summary["attempts"] += len(attempts)
        for r in results:
            summary[r["status"]] += 1
    return summary
