"""The hard-negative losses against direct computations, and gradient caching against a plain
backward pass."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from autocomp.finetune.losses import negclip_loss, sigmoid_hard_loss  # noqa: E402


def _unit(rows):
    t = torch.tensor(rows, dtype=torch.float64)
    return t / t.norm(dim=-1, keepdim=True)


IMAGES = _unit([[1.0, 0.2, 0.0], [0.1, 1.0, 0.3]])
TEXTS = _unit([[0.9, 0.1, 0.2], [0.0, 0.8, 0.5]])
HARD = _unit([[1.0, 0.0, 0.1], [0.5, 0.5, 0.0], [0.2, 1.0, 0.0], [0.0, 0.3, 1.0]])  # K=2
SCALE = torch.tensor(math.log(10.0), dtype=torch.float64)
BIAS = torch.tensor(-2.0, dtype=torch.float64)


def _dot(a, b):
    return sum(x * y for x, y in zip(a.tolist(), b.tolist()))


def test_negclip_loss_equals_a_direct_computation():
    t, b, k = 10.0, 2, 2
    total = 0.0
    for i in range(b):  # image -> text over B captions + B*K hard negatives
        cands = [TEXTS[j] for j in range(b)] + [HARD[j] for j in range(b * k)]
        logits = [t * _dot(IMAGES[i], c) for c in cands]
        total += -(logits[i] - math.log(sum(math.exp(x) for x in logits))) / b / 2
    for i in range(b):  # text -> image over the B images only
        logits = [t * _dot(TEXTS[i], IMAGES[j]) for j in range(b)]
        total += -(logits[i] - math.log(sum(math.exp(x) for x in logits))) / b / 2
    assert float(negclip_loss(IMAGES, TEXTS, HARD, SCALE)) == pytest.approx(total, rel=1e-12)


def test_sigmoid_hard_loss_equals_a_direct_computation():
    t, bias, b = 10.0, -2.0, 2
    total = 0.0
    cands = [TEXTS[j] for j in range(b)] + [HARD[j] for j in range(4)]
    for i in range(b):
        for j, c in enumerate(cands):
            label = 1.0 if j == i else -1.0
            z = label * (t * _dot(IMAGES[i], c) + bias)
            total += math.log(1 + math.exp(-z)) / b
    assert float(sigmoid_hard_loss(IMAGES, TEXTS, HARD, SCALE, BIAS)) == pytest.approx(
        total, rel=1e-12
    )


def test_k0_is_plain_infonce_and_plain_siglip():
    from open_clip.loss import ClipLoss, SigLipLoss

    empty = IMAGES[:0]
    clip = ClipLoss()(IMAGES, TEXTS, SCALE.exp())
    assert float(negclip_loss(IMAGES, TEXTS, empty, SCALE)) == pytest.approx(float(clip))
    siglip = SigLipLoss()(IMAGES, TEXTS, SCALE.exp(), BIAS)
    assert float(sigmoid_hard_loss(IMAGES, TEXTS, empty, SCALE, BIAS)) == pytest.approx(
        float(siglip)
    )
    # hard negatives make the task harder: the loss grows
    assert float(negclip_loss(IMAGES, TEXTS, HARD, SCALE)) > float(clip)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["tiny-clip", "tiny-siglip"])
def test_gradient_caching_gives_the_full_batch_gradient(model):
    from PIL import Image

    from autocomp.finetune.train import _Encoder, load_base, train_step
    from autocomp.scoring.registry import get_model

    entry = get_model(model)
    net, preprocess, tokenizer, _ = load_base(entry, "cpu")
    enc = _Encoder(net.train(), preprocess, tokenizer, "cpu", amp=False)
    images = [Image.new("RGB", (40, 40), (40 * i, 255 - 30 * i, 90)) for i in range(6)]
    texts = [f"a red cup number {i}" for i in range(6)]
    texts += [f"a blue lamp {i} {j}" for i in range(6) for j in range(2)]
    pixels = enc.pixels(images)
    grads = []
    for micro in (64, 2):  # plain backward, then three cached micro-batches
        net.zero_grad()
        loss = train_step(enc, entry.score, pixels, texts, k=2, micro=micro)
        grads.append((loss, {n: p.grad.clone() for n, p in net.named_parameters()}))
    (loss_a, a), (loss_b, b) = grads
    assert loss_a == pytest.approx(loss_b, rel=1e-5)
    assert any(float(g.abs().sum()) > 0 for g in a.values())
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=1e-3, atol=1e-6), name
