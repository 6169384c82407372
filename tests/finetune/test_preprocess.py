"""Train on what is scored: fine-tuning feeds each image through the preprocessing the scorer
uses, the registry's declared one (mean, std, interpolation, resize mode), not open_clip's
default for the architecture."""

from __future__ import annotations

import pytest
import torch
from PIL import Image

from autocomp.finetune.train import load_base
from autocomp.scoring.contrastive import OpenClipScorer
from autocomp.scoring.registry import get_model


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny-siglip", "tiny-clip"])
def test_training_preprocessing_is_the_scorers(name):
    entry = get_model(name)
    _, train_preprocess, _, _ = load_base(entry, "cpu")
    scorer = OpenClipScorer(entry, device="cpu")
    image = Image.new("RGB", (48, 20), (200, 30, 90))  # not square: the resize mode matters
    for x in range(0, 48, 3):
        image.putpixel((x, x % 20), (10, 250, 10))
    assert torch.equal(train_preprocess(image), scorer.preprocess(image))
