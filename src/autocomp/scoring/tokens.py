"""Token ids of open_clip captions, cached: per (tokenizer, caption) in the process, shared by
the models whose text config names the same tokenizer and context (`tokenizer_key`), and per
word piece for open_clip's BPE tokenizer (`PieceTokenizer`). The contrastive scorer
(scoring/contrastive.py) reads both; open_clip is imported only when a tokenizer is asked for."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

# captions (or word pieces) kept per tokenizer before the cache starts over
TOKEN_CACHE_LIMIT = 1_000_000
TOKEN_CACHE: dict[str, dict[str, tuple[Any, bool]]] = {}  # tokenizer_key -> caption -> (ids, cut)


def tokenizer_key(architecture: str) -> str:
    """Models whose text config names the same tokenizer and context share token ids."""
    import open_clip

    text = (open_clip.get_model_config(architecture) or {}).get("text_cfg", {})
    keys = ("hf_tokenizer_name", "tokenizer_kwargs", "context_length", "vocab_size")
    return json.dumps({k: text.get(k) for k in keys}, sort_keys=True)


class PieceTokenizer:
    """open_clip's BPE tokenizer (`SimpleTokenizer`) with the ids of each word piece cached.

    Its `encode` cleans a caption (ftfy, HTML entities, white space, lower case), splits it by
    its regular expression into pieces and runs byte-level BPE on each piece; the ids of a piece
    depend on the piece alone. Captions of one benchmark are permutations of a few words, so
    after the per-caption cleaning and split each piece's ids come from a dict: the same ids as
    `tokenizer(texts, context_length)` (truncation included: the first `context` ids, the last
    replaced by end-of-text), at a fraction of the cost (tests/scoring/test_contrastive.py)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.ids: dict[str, list[int]] = {}

    @classmethod
    def of(cls, tokenizer: Any) -> PieceTokenizer | None:
        """The cached form of `tokenizer`, or None when it is not open_clip's plain BPE."""
        from open_clip.tokenizer import SimpleTokenizer

        if type(tokenizer) is not SimpleTokenizer or tokenizer.reduction_fn is not None:
            return None
        return cls(tokenizer)

    def _piece(self, piece: str) -> list[int]:
        tok = self.tokenizer
        word = "".join(tok.byte_encoder[b] for b in piece.encode("utf-8"))
        ids = [tok.encoder[bpe] for bpe in tok.bpe(word).split(" ")]
        if len(self.ids) < TOKEN_CACHE_LIMIT:
            self.ids[piece] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """`SimpleTokenizer.encode(text)`."""
        tok, out = self.tokenizer, []
        for piece in tok.pat.findall(tok.clean_fn(text)):
            found = self.ids.get(piece)
            out.extend(found if found is not None else self._piece(piece))
        return out

    def rows(self, texts: Sequence[str], context: int) -> tuple[Any, list[bool]]:
        """(ids, cut): the (len(texts), context) ids `tokenizer(texts, context)` returns, and
        whether each caption was longer than the context."""
        import numpy as np
        import torch

        tok = self.tokenizer
        ids = np.zeros((len(texts), context), dtype=np.int64)
        cut = []
        for i, text in enumerate(texts):
            tokens = [tok.sot_token_id, *self.encode(text), tok.eot_token_id]
            cut.append(len(tokens) > context)
            if cut[-1]:
                tokens = tokens[:context]
                tokens[-1] = tok.eot_token_id
            ids[i, : len(tokens)] = tokens
        return torch.from_numpy(ids), cut
