"""ARO COCO-Order / Flickr30k-Order: a fixture in the release's format (coco_karpathy_test.json:
a list of {image, caption: [...]}, the images under the COCO root), its options built and scored
by a transcription of aro_datasets.py COCO_Order (TextShuffler with the global np.random /
random, pre_caption, evaluate_scores' argmax == 0) and by autocomp: equal, ties included.

spaCy's en_core_web_sm and NLTK's punkt cannot be installed from a package registry here, so
the golden test gives both sides the same stand-in tagger and tokenizer (a word list's tags,
words split off their punctuation): what is checked is every step around them, and that the
perturbations are frozen by the seed. Without the real tools the import is refused in one line
(the last test)."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from autocomp.analysis.harness import harness_of, metrics, outcomes
from autocomp.errors import UsageError
from autocomp.importers import import_benchmark, order
from tests.importers import official
from tests.importers.harness_support import png, run_scores, tied_scorer

TAGS = {"dog": "NN", "dogs": "NNS", "frisbee": "NN", "park": "NN", "man": "NN", "bike": "NN",
        "street": "NN", "red": "JJ", "small": "JJ", "old": "JJ", "green": "JJ", "busy": "JJ"}  # fmt: skip
CAPTIONS = [
    ["A small dog catches a red frisbee in the park.", "Two dogs play in a green park!"],
    ["An old man rides a red bike down the busy street.", "A man on a bike.",
     "The street is busy; a man rides by."],
]  # fmt: skip


class Token:
    def __init__(self, text: str) -> None:
        self.text, self.tag_ = text, TAGS.get(text.lower(), "XX")


def stand_in_nlp(text: str) -> list[Token]:
    return [Token(t) for t in re.findall(r"\w+|[^\w\s]", text)]


def stand_in_words(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text)


@pytest.fixture
def tools(monkeypatch):
    monkeypatch.setattr(
        order, "language_tools",
        lambda: (lambda text: [(t.text, t.tag_) for t in stand_in_nlp(text)], stand_in_words),
    )  # fmt: skip


@pytest.fixture
def coco(tmp_path):
    root = tmp_path / "coco"
    (root / "val2014").mkdir(parents=True)
    annotations = []
    for i, captions in enumerate(CAPTIONS):
        name = f"val2014/COCO_val2014_{i:012d}.jpg"
        (root / name).write_bytes(png(i))
        annotations.append({"image": name, "caption": captions, "image_id": i})
    (root / "coco_karpathy_test.json").write_text(json.dumps(annotations))
    return root


# ------------------------------------------------ aro_datasets.py COCO_Order, transcribed


class TextShuffler:
    """perturbations.py:48-118 with the stand-in nlp and word_tokenize."""

    def shuffle_nouns_and_adj(self, ex):
        doc = stand_in_nlp(ex)
        text = np.array([token.text for token in doc])
        noun_idx = [i for i, token in enumerate(doc) if token.tag_ in ["NN", "NNS", "NNP", "NNPS"]]
        adjective_idx = [i for i, token in enumerate(doc) if token.tag_ in ["JJ", "JJR", "JJS"]]
        text[noun_idx] = np.random.permutation(text[noun_idx])
        text[adjective_idx] = np.random.permutation(text[adjective_idx])
        return " ".join(text)

    def shuffle_allbut_nouns_and_adj(self, ex):
        doc = stand_in_nlp(ex)
        text = np.array([token.text for token in doc])
        noun_adj_idx = [i for i, token in enumerate(doc)
                        if token.tag_ in ["NN", "NNS", "NNP", "NNPS", "JJ", "JJR", "JJS"]]  # fmt: skip
        else_idx = np.ones(text.shape[0])
        else_idx[noun_adj_idx] = 0
        else_idx = else_idx.astype(bool)
        text[else_idx] = np.random.permutation(text[else_idx])
        return " ".join(text)

    def get_trigrams(self, sentence):
        trigrams, trigram = [], []
        for i in range(len(sentence)):
            trigram.append(sentence[i])
            if i % 3 == 2:
                trigrams.append(trigram[:])
                trigram = []
        if trigram:
            trigrams.append(trigram)
        return trigrams

    def shuffle_within_trigrams(self, ex):
        trigrams = self.get_trigrams(stand_in_words(ex))
        for trigram in trigrams:
            random.shuffle(trigram)
        return " ".join([" ".join(trigram) for trigram in trigrams])

    def shuffle_trigrams(self, ex):
        trigrams = self.get_trigrams(stand_in_words(ex))
        random.shuffle(trigrams)
        return " ".join([" ".join(trigram) for trigram in trigrams])


def pre_caption(caption, max_words=50):
    """retrieval.py:15-33."""
    caption = re.sub(r"([.!\"()*#:;~])", " ", caption.lower())
    caption = re.sub(r"\s{2,}", " ", caption)
    caption = caption.rstrip("\n").strip(" ")
    caption_words = caption.split(" ")
    if len(caption_words) > max_words:
        caption = " ".join(caption_words[:max_words])
    return caption


def script_options(annotation, seed):
    """COCO_Order.__init__ (aro_datasets.py:223-231), the global generators seeded per caption
    as autocomp seeds its own (order.seeded): the draws are then the same."""
    shuffler = TextShuffler()
    fns = [shuffler.shuffle_nouns_and_adj, shuffler.shuffle_allbut_nouns_and_adj,
           shuffler.shuffle_within_trigrams, shuffler.shuffle_trigrams]  # fmt: skip
    cases = []
    for img_id, ann in enumerate(annotation):
        for i, caption in enumerate(ann["caption"]):
            key = (seed * 1_000_003 + img_id) * 101 + i
            np.random.seed(key % 2**32)
            random.seed(key)
            options = [pre_caption(caption, 30)]
            for fn in fns:
                options.append(pre_caption(fn(caption), 30))
            cases.append((ann["image"], options))
    return cases


@pytest.mark.parametrize("seed", range(5))
def test_autocomp_equals_the_script(tools, coco, tmp_path, seed):
    out = tmp_path / "bench"
    report = import_benchmark("aro-coco-order", coco, out, coco)
    assert report["groups"] == 5 and report["tie"] == "first"
    annotations = json.loads((coco / "coco_karpathy_test.json").read_text())
    cases = script_options(annotations, order.SEED)
    harness = harness_of(out)
    rows = sorted(harness.rows.to_pylist(), key=lambda r: r["sample_id"])
    by_group = {r["group_id"]: r["texts"] for r in rows}
    expected_texts = {
        f"{i}-{c}": None for i, a in enumerate(annotations) for c in range(len(a["caption"]))
    }
    for key, (_, texts) in zip(expected_texts, cases):
        assert by_group[key] == texts
    score = tied_scorer(seed)
    scores = np.array([[[score(image, t) for t in texts]] for image, texts in cases])
    table = metrics(outcomes(harness, {"m": run_scores(out, score)}), harness.aggregate)
    got = {r["tie"]: r["accuracy"] for r in table.to_pylist()
           if r["subset"] == "all" and r["score_type"] == "score"}  # fmt: skip
    assert got["official"] == pytest.approx(official.aro_order(scores), rel=1e-12)


def test_the_perturbations_are_frozen_and_really_perturb(tools, coco, tmp_path):
    first = import_benchmark("aro-coco-order", coco, tmp_path / "a", coco)
    second = import_benchmark("aro-coco-order", coco, tmp_path / "b", coco)
    assert first["groups"] == second["groups"]
    a = harness_of(tmp_path / "a").rows.to_pylist()
    b = harness_of(tmp_path / "b").rows.to_pylist()
    assert [r["texts"] for r in a] == [r["texts"] for r in b]
    words = [sorted(t.split()) for t in a[0]["texts"]]
    assert all(w == words[0] for w in words)  # the same words, reordered
    assert len(set(a[0]["texts"])) > 1


def test_without_spacy_and_nltk_the_import_is_refused_in_one_line(coco, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "spacy", None)  # not installed (as here)
    with pytest.raises(UsageError, match="en_core_web_sm.*pip install spacy nltk"):
        import_benchmark("aro-coco-order", coco, tmp_path / "out", coco)
    assert not (tmp_path / "out").exists()
