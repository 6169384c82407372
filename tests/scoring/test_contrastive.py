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
