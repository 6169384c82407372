import pytest
from PIL import Image

from autocomp.scoring import ScoreRequest, load_scorer

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def images():
    return {
        "red": Image.new("RGB", (64, 64), (200, 20, 20)),
        "blue": Image.new("RGB", (40, 90), (20, 20, 200)),
    }


def requests():
    return [
        ScoreRequest("red", "A red cup and a blue lamp."),
        ScoreRequest("red", "A blue cup and a red lamp."),
        ScoreRequest("blue", "A red cup and a blue lamp."),
        ScoreRequest("blue", "A blue cup."),
    ]


def test_clip_cosine_matches_a_direct_computation(images):
    import torch

    scorer = load_scorer("tiny-clip", device="cpu")
    scores = scorer.score(requests(), images)
    assert len(scores) == 4 and all(-1 <= s <= 1 for s in scores)
    # each distinct image and caption is encoded exactly once
    assert scorer.calls["image_encodes"] == 2 and scorer.calls["text_encodes"] == 3
    model, pre, tok = scorer.model, scorer.preprocess, scorer.tokenizer
    with torch.no_grad():
        img = model.encode_image(pre(images["blue"]).unsqueeze(0))
        txt = model.encode_text(tok(["A blue cup."]))
        direct = torch.nn.functional.cosine_similarity(img, txt).item()
    assert scores[3] == pytest.approx(direct, abs=1e-5)


def test_siglip_score_uses_logit_scale_and_bias(images):
    siglip = load_scorer("tiny-siglip", device="cpu")
    assert siglip.model.logit_bias.item() == pytest.approx(-10.0)
    scores = siglip.score(requests(), images)
    cosine = load_scorer("tiny-siglip", device="cpu")
    cosine.entry = cosine.entry.__class__(**{**cosine.entry.__dict__, "score": "cosine"})
    cos = cosine.score(requests(), images)
    scale = siglip.model.logit_scale.exp().item()
    assert scores == pytest.approx([scale * c - 10.0 for c in cos], abs=1e-4)


def test_tiny_weights_round_trip_through_the_production_loader(images):
    a = load_scorer("tiny-clip", device="cpu").score(requests(), images)
    b = load_scorer("tiny-clip", device="cpu").score(requests(), images)
    assert a == b
    from autocomp.tiny.scoring import cache_dir

    assert (cache_dir() / "tiny-clip" / "open_clip_model.safetensors").is_file()


def test_contrastive_refuses_blind_requests(images):
    scorer = load_scorer("tiny-clip", device="cpu")
    with pytest.raises(ValueError, match="without an image"):
        scorer.score([ScoreRequest(None, "A cup.")], images)


def test_missing_local_weights_name_the_fix(monkeypatch, tmp_path):
    from autocomp.errors import UsageError

    monkeypatch.setenv("AUTOCOMP_WEIGHTS_DIR", str(tmp_path))
    with pytest.raises(UsageError, match="negclip.pth.*AUTOCOMP_WEIGHTS_DIR"):
        load_scorer("negclip", device="cpu")


def _color_captions(count: int) -> list[str]:
    from autocomp.protocol.concepts import sample_concepts
    from autocomp.protocol.family import load_family
    from autocomp.protocol.minimal import minimal_caption
    from autocomp.protocol.negatives import build_candidates

    family = load_family("color")
    out = []
    for c in sample_concepts(family, 3, count, seed=0):
        text = minimal_caption(family, c.objects, c.labels)
        sets = build_candidates(family, c.objects, c.labels, text)
        out += [sets.caption, *sets.confusion[:40]]
    long = "A red cup, " + ", ".join(f"a blue lamp number {i}" for i in range(30)) + "."
    return [*out, "A cup.", "In a sunlit kitchen, a red cup beside a lamp.", long]


def _padded_scores(scorer, image, texts):
    """open_clip's own path: every caption at the full context, one batch."""
    import torch

    with torch.no_grad():
        img = scorer.model.encode_image(scorer.preprocess(image).unsqueeze(0))
        txt = scorer.model.encode_text(scorer.tokenizer(texts))
        cos = torch.nn.functional.cosine_similarity(img, txt)
    if scorer.entry.score == "sigmoid":
        cos = scorer.model.logit_scale.exp() * cos + scorer.model.logit_bias
    return cos.tolist()


@pytest.mark.parametrize("model", ["tiny-clip", "tiny-siglip"])
def test_length_batched_text_matches_the_padded_path(images, model):
    scorer = load_scorer(model, device="cpu", batch_size=16)
    texts = _color_captions(3)
    fast = scorer.score([ScoreRequest("red", t) for t in texts], images)
    slow = _padded_scores(scorer, images["red"], texts)
    assert max(abs(a - b) for a, b in zip(fast, slow)) <= 1e-5
    assert max(range(len(fast)), key=fast.__getitem__) == max(
        range(len(slow)), key=slow.__getitem__
    )
    full = len(texts) * scorer.context
    if model == "tiny-clip":  # causal, EOT-pooled: each batch runs to its longest caption only
        assert scorer.trim and scorer.calls["text_positions"] < full / 2
    else:  # non-causal, last-position pooling: the padding matters, so the full context runs
        assert not scorer.trim and scorer.calls["text_positions"] == full


def test_truncated_captions_are_flagged_with_the_tokenizers_own_ids():
    scorer = load_scorer("tiny-clip", device="cpu")
    texts = _color_captions(1)[-3:]
    assert scorer.truncated(texts) == [False, False, True]
    for text in texts:
        assert scorer.tokens[text][0].tolist() == scorer.tokenizer([text])[0].tolist()


def test_models_with_one_tokenizer_share_token_ids():
    a = load_scorer("tiny-clip", device="cpu")
    a.truncated(["A red cup."])
    b = load_scorer("tiny-clip", device="cpu")
    assert b.tokens is a.tokens and "A red cup." in b.tokens
    assert load_scorer("tiny-siglip", device="cpu").tokens is not a.tokens  # context 64, not 77


@pytest.mark.parametrize("model", ["tiny-clip", "tiny-siglip"])
def test_preprocessing_is_the_registrys(model):
    from torchvision.transforms import CenterCrop, Normalize, Resize

    scorer = load_scorer(model, device="cpu")
    pre = scorer.entry.preprocess
    steps = scorer.preprocess.transforms
    norm = next(s for s in steps if isinstance(s, Normalize))
    assert list(norm.mean) == pytest.approx(pre["mean"]) and list(norm.std) == pytest.approx(
        pre["std"]
    )
    resize = next(s for s in steps if isinstance(s, Resize))
    assert resize.interpolation.value == pre["interpolation"]
    if pre["resize_mode"] == "squash":  # both sides to the resolution, no crop
        assert list(resize.size) == [pre["resolution"]] * 2
        assert not any(isinstance(s, CenterCrop) for s in steps)
    else:
        assert any(isinstance(s, CenterCrop) for s in steps)
    assert scorer.model.visual.image_size[0] == pre["resolution"]


def _peer_loops():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from scoring_baselines import batched_loop, per_item_loop

    return {"batched loop": batched_loop, "per-item loop": per_item_loop}


def _argmax(values):
    return max(range(len(values)), key=values.__getitem__)


@pytest.mark.parametrize("model", ["tiny-clip", "tiny-siglip"])
@pytest.mark.parametrize("n, count", [(2, 24), (3, 3)])
def test_predictions_are_the_peer_loops(model, n, count):
    """autocomp's scores and every item's prediction equal the CLIP_benchmark-style batched loop's
    and the SugarCrepe-style per-item loop's (benchmarks/scoring_baselines.py), with the CPU
    default's cache-bounded text batches (SigLIP: 128 captions of 64 positions, not 256)."""
    from autocomp.protocol.concepts import sample_concepts
    from autocomp.protocol.family import load_family
    from autocomp.protocol.minimal import minimal_caption
    from autocomp.protocol.negatives import build_candidates
    from autocomp.scoring.contrastive import CPU_TEXT_FLOATS

    family = load_family("color")
    items = []
    for c in sample_concepts(family, n, count, seed=1):
        sets = build_candidates(
            family, c.objects, c.labels, minimal_caption(family, c.objects, c.labels)
        )
        items.append([sets.caption, *sets.confusion])
    pictures = [Image.new("RGB", (48, 40), (37 * i % 256, 90, 200 - 7 * i)) for i in range(count)]
    scorer = load_scorer(model, device="cpu")
    assert scorer.text_positions == CPU_TEXT_FLOATS // 64  # both tiny text towers are 64 wide
    requests = [ScoreRequest(f"i{k}", t) for k, texts in enumerate(items) for t in texts]
    flat = scorer.score(requests, {f"i{k}": p for k, p in enumerate(pictures)})
    ours, offset = [], 0
    for texts in items:
        ours.append(flat[offset : offset + len(texts)])
        offset += len(texts)
    if not scorer.trim:  # every batch at the full 64 positions, within the budget
        assert scorer.calls["text_positions"] <= scorer.calls["text_batches"] * 8192
        assert scorer.calls["text_batches"] == -(-len(requests) // 128)
    for name, loop in _peer_loops().items():
        theirs = loop(scorer, items, pictures)
        assert [_argmax(x) for x in ours] == [_argmax(y) for y in theirs], name
        diff = max(abs(a - b) for x, y in zip(ours, theirs) for a, b in zip(x, y))
        assert diff <= 1e-5, (name, diff)


HOSTILE_TEXTS = [
    "",
    "   ",
    "A red cup.",
    "a RED   cup\tand\na blue lamp",
    "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e on a na\u00efve r\u00e9sum\u00e9.",
    "The \u201ccurly\u201d quote\u2019s & &amp; &lt;tag&gt; \ufb01ne",
    "\u00e2\u0080\u0099 mojibake \u00c3\u00a9t\u00c3\u00a9",
    "emoji \U0001f600 and CJK \u732b\u306e\u5199\u771f, 12345 678",
    "it's they're we've I'm you'll he'd don't",
    "x" * 300,
    " ".join(["word"] * 90),
    "A red cup, " + ", ".join(f"a blue lamp number {i}" for i in range(30)) + ".",
]


@pytest.mark.parametrize("model", ["tiny-clip", "tiny-siglip"])
def test_the_piece_cache_gives_the_tokenizers_own_ids(model):
    """PieceTokenizer (each word piece's ids cached) equals open_clip's SimpleTokenizer on
    every caption: cleaning, unicode, HTML entities, contractions, truncation at the context."""
    import torch

    from autocomp.scoring.contrastive import PieceTokenizer

    scorer = load_scorer(model, device="cpu")
    pieces = PieceTokenizer.of(scorer.tokenizer)
    assert pieces is not None
    texts = HOSTILE_TEXTS + _color_captions(2)
    for round_ in range(2):  # cold, then every piece from the cache
        ids, cut = pieces.rows(texts, scorer.context)
        want = scorer.tokenizer(texts, context_length=scorer.context)
        assert torch.equal(ids, want), round_
        longer = scorer.tokenizer(texts, context_length=scorer.context + 1)[:, -1] != 0
        assert cut == longer.tolist()
    assert any(cut) and not all(cut)
    for text in texts:
        assert pieces.encode(text) == scorer.tokenizer.encode(text)
