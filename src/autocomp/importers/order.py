"""ARO's COCO-Order and Flickr30k-Order: each caption against four word-order perturbations of
itself, as the authors build and score them (github.com/mertyg/vision-language-models-are-bows @
81fdd20, dataset_zoo/aro_datasets.py COCO_Order / Flickr30k_Order, perturbations.py).

Release layout: the retrieval annotations the loader downloads, `coco_karpathy_test.json` /
`flickr30k_test.json` (or their `_val` files): a JSON list of {image, caption: [captions]}, the
image a path under the dataset's root (`val2014/COCO_val2014_....jpg`,
`flickr30k-images/....jpg`; --images is that root).

Per caption (aro_datasets.py:223-231) the options are the caption and its four perturbations
(TextShuffler: shuffle_nouns_and_adj, shuffle_allbut_nouns_and_adj, shuffle_within_trigrams,
shuffle_trigrams; perturbations.py:48-120), each cleaned by `pre_caption(text, 30)`
(retrieval.py:15-33). The original draws the perturbations at random each time the dataset is
built; here they are drawn once, at import, from generators seeded by SEED and the caption's
place (`seeded`), so the benchmark is fixed and recorded. Nouns and adjectives are found by
spaCy's `en_core_web_sm` tagger (Penn tags NN, NNS, NNP, NNPS / JJ, JJR, JJS) and trigrams over
NLTK's `word_tokenize`, as in the script: both are needed at import (`language_tools`), and an
import without them is refused in one line naming what to install.

Scoring (evaluate_scores, lines 269-281): Precision@1, `np.argmax` over the five options equal
to 0; argmax returns the first maximum, so a tie with the true caption counts as right (rule
`image-to-text-first`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autocomp.errors import UsageError
from autocomp.importers.harness import Group, Parsed
from autocomp.importers.sources import read_json

SEED = 0  # the seed every import draws the perturbations under (recorded per group)
MAX_WORDS = 30  # aro_datasets.py COCO_Order(max_words=30)
NOUNS = ("NN", "NNS", "NNP", "NNPS")
ADJECTIVES = ("JJ", "JJR", "JJS")
EXPECTS = (
    "give ARO's COCO / Flickr30k retrieval annotations (coco_karpathy_test.json, "
    "flickr30k_test.json: a list of {image, caption: [captions]}) with --images the dataset root"
)
Tagger = Callable[[str], list[tuple[str, str]]]  # text -> (token, Penn tag) per token
Words = Callable[[str], list[str]]  # text -> NLTK word tokens


def pre_caption(caption: str, max_words: int = MAX_WORDS) -> str:
    """retrieval.py:15-33, as written."""
    caption = re.sub(r"([.!\"()*#:;~])", " ", caption.lower())
    caption = re.sub(r"\s{2,}", " ", caption)
    caption = caption.rstrip("\n")
    caption = caption.strip(" ")
    words = caption.split(" ")
    if len(words) > max_words:
        caption = " ".join(words[:max_words])
    return caption


def shuffle_nouns_and_adj(tagged: list[tuple[str, str]], rng: np.random.RandomState) -> str:
    """perturbations.py:52-64: nouns among nouns, then adjectives among adjectives."""
    text = np.array([token for token, _ in tagged])
    nouns = [i for i, (_, tag) in enumerate(tagged) if tag in NOUNS]
    adjectives = [i for i, (_, tag) in enumerate(tagged) if tag in ADJECTIVES]
    text[nouns] = rng.permutation(text[nouns])
    text[adjectives] = rng.permutation(text[adjectives])
    return " ".join(text)


def shuffle_allbut_nouns_and_adj(tagged: list[tuple[str, str]], rng: np.random.RandomState) -> str:
    """perturbations.py:70-82: every word that is neither noun nor adjective, among those."""
    text = np.array([token for token, _ in tagged])
    kept = [i for i, (_, tag) in enumerate(tagged) if tag in NOUNS + ADJECTIVES]
    others = np.ones(text.shape[0])
    others[kept] = 0
    mask = others.astype(bool)
    text[mask] = rng.permutation(text[mask])
    return " ".join(text)


def trigrams(tokens: Sequence[str]) -> list[list[str]]:
    """perturbations.py:85-97 (get_trigrams)."""
    out, current = [], []
    for i, token in enumerate(tokens):
        current.append(token)
        if i % 3 == 2:
            out.append(current[:])
            current = []
    if current:
        out.append(current)
    return out


def shuffle_within_trigrams(tokens: list[str], rng: random.Random) -> str:
    """perturbations.py:99-109: each trigram's words shuffled."""
    groups = trigrams(tokens)
    for group in groups:
        rng.shuffle(group)
    return " ".join(" ".join(group) for group in groups)


def shuffle_trigrams(tokens: list[str], rng: random.Random) -> str:
    """perturbations.py:112-118: the trigrams shuffled as wholes."""
    groups = trigrams(tokens)
    rng.shuffle(groups)
    return " ".join(" ".join(group) for group in groups)


def seeded(seed: int, image: int, caption: int) -> tuple[np.random.RandomState, random.Random]:
    """The two generators of one caption (numpy's for the tag shuffles, Python's for the
    trigram ones, as the script uses np.random and random): fixed by the seed and the place."""
    key = (seed * 1_000_003 + image) * 101 + caption
    return np.random.RandomState(key % 2**32), random.Random(key)


def options(caption: str, tagger: Tagger, words: Words, rngs: tuple[Any, Any]) -> list[str]:
    """The five options of one caption (aro_datasets.py:226-230): itself, then its four
    perturbations, each through pre_caption."""
    state, rng = rngs
    tagged = tagger(caption)
    tokens = words(caption)
    perturbed = [
        shuffle_nouns_and_adj(tagged, state),
        shuffle_allbut_nouns_and_adj(tagged, state),
        shuffle_within_trigrams(list(tokens), rng),
        shuffle_trigrams(list(tokens), rng),
    ]
    return [pre_caption(caption), *(pre_caption(p) for p in perturbed)]


def language_tools() -> tuple[Tagger, Words]:
    """spaCy's en_core_web_sm tagger and NLTK's word_tokenize, as perturbations.py loads them;
    UsageError naming what to install when either is missing."""
    try:
        import nltk
        import spacy

        nlp = spacy.load("en_core_web_sm")
        nltk.word_tokenize("a b")
    except (ImportError, OSError, LookupError):
        raise UsageError(
            "source", "COCO / Flickr30k Order", "its perturbations need spaCy's en_core_web_sm "
            "tagger and NLTK's punkt tokenizer, as ARO's script: pip install spacy nltk; "
            "python -m spacy download en_core_web_sm; python -m nltk.downloader punkt_tab"
        ) from None  # fmt: skip
    return (lambda text: [(t.text, t.tag_) for t in nlp(text)]), nltk.word_tokenize


def _file(source: Path) -> Path:
    if source.is_dir():
        found = sorted(source.glob("*_test.json")) or sorted(source.glob("*.json"))
        if len(found) != 1:
            raise UsageError(
                "source", str(source), f"holds {len(found)} annotation files; {EXPECTS}"
            )
        return found[0]
    if not source.is_file():
        raise UsageError("source", str(source), "no such file or folder")
    return source


def parse(source: Path) -> Parsed:
    """Every caption of every image as a group: the image x its five options (true first)."""
    file = _file(source)
    annotations = read_json(file)
    if not isinstance(annotations, list) or not annotations:
        raise UsageError("source", str(file), f"must be a non-empty JSON list; {EXPECTS}")
    for number, ann in enumerate(annotations):
        ok = isinstance(ann, dict) and isinstance(ann.get("image"), str)
        if not ok or not isinstance(ann.get("caption"), list):
            raise UsageError(
                "source", f"{file.name} item {number}", f"needs image and caption (a list); "
                f"{EXPECTS}"
            )  # fmt: skip
    tagger, words = language_tools()
    subset = file.stem
    groups = []
    for i, ann in enumerate(annotations):
        for c, caption in enumerate(ann["caption"]):
            texts = options(str(caption), tagger, words, seeded(SEED, i, c))
            groups.append(Group(
                subset=subset, group_id=f"{i}-{c}", images=(ann["image"],), texts=tuple(texts),
                truth=((0,),), query="image", meta={"seed": SEED, "caption": c},
            ))  # fmt: skip
    return Parsed(groups, [file.name])
