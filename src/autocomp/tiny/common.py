"""What every tiny random-weight model shares: the cache folder, a chat template and a
byte-level tokenizer that need no download."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autocomp.store.atomic import atomic_folder

WEIGHTS = "tiny"  # a registry entry's `weights` for a model built here (ModelEntry.is_tiny)
RANDOM = "random: built from a config with seed 0 (autocomp.tiny), never trained"


def weights_record(weights: str, base_weights: str | None = None) -> dict[str, Any]:
    """How a model's weights were made, as its run records them (run.json `weights`, read by
    the report and the CLI's last lines): the models built here have random weights, and so,
    for what its numbers mean, has one fine-tuned from them (`base_weights`: its base model's
    `weights`). Any other weights are what their source trained."""
    if weights == WEIGHTS:
        return {"random": True, "how": RANDOM}
    if base_weights == WEIGHTS:
        return {"random": True, "how": f"fine-tuned a few steps from weights that are {RANDOM}"}
    return {"random": False}


def cache_dir() -> Path:
    """Where tiny weights live: $AUTOCOMP_CACHE/tiny, default ~/.cache/autocomp/tiny."""
    root = os.environ.get("AUTOCOMP_CACHE") or Path.home() / ".cache" / "autocomp"
    return Path(root) / "tiny"


CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}"
    "{{ m['content'] }}{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}IMAGE"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def byte_level_tokenizer(specials: list[str], merges: tuple[tuple[str, str], ...] = ()) -> Any:
    """A byte-level BPE tokenizer, every byte one token but for `merges` (pairs of byte-level
    symbols, e.g. ("Ċ", "Ċ") for two newlines), and the given specials (a
    Qwen2Tokenizer, typed Any: its convert_tokens_to_ids(str) is typed int | list[int])."""
    from transformers import Qwen2Tokenizer

    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            chars.append(256 + extra)
            extra += 1
    vocab = {chr(c): i for i, c in enumerate(chars)}
    for left, right in merges:
        vocab[left + right] = len(vocab)
    tokenizer = Qwen2Tokenizer(
        # transformers types unk_token as str; a byte-level vocabulary has no unknown token
        vocab=vocab, merges=list(merges), unk_token=None, bos_token=None,  # type: ignore[arg-type]
        eos_token="<|endoftext|>", pad_token="<|endoftext|>",
    )  # fmt: skip
    tokenizer.add_special_tokens({"additional_special_tokens": specials})
    return tokenizer


def build_once(final: Path, save: Callable[[Path], None]) -> Path:
    """Build a model folder once, safely under concurrency: `save(tmp)` writes into a folder
    private to this process and thread, which is then renamed into place atomically. When two
    workers build the same model at once, the first rename wins and the other build is
    discarded (tiny models are seeded, so both are the same); readers see a complete folder or
    none."""
    try:
        with atomic_folder(final) as tmp:
            save(tmp)
    except FileExistsError:  # another worker's build won the rename: it is the same model
        pass
    return final
