"""The original Grounding DINO package against transformers' port (the default detector), on
the same random weights: SwinT-OGC with a tiny BERT, built and run by groundingdino-py in
.envs/gdino (transformers<5, a subprocess), converted with transformers' converter mapping
(autocomp.generation.gdino_original) and run by the port here (transformers 5).

The gdino lane (`make test-gdino`) runs it; the main lane deselects the marker."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.gdino, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GDINO_PYTHON = Path(os.environ.get("AUTOCOMP_GDINO_PYTHON", ROOT / ".envs/gdino/bin/python"))
CAPTION = "red cube. blue ball."
HEIGHT, WIDTH = 224, 256  # >= 900 proposals over the four feature levels (num_queries)
THRESHOLDS = {"threshold": 0.4, "text_threshold": 0.3}  # models.yaml's grounding-dino-tiny
LOGITS_TOLERANCE = 1e-4
BOXES_TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The original's inputs and outputs (its subprocess) and the port's on the same pixels."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import (
        BertConfig,
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        SwinConfig,
    )

    from autocomp.generation.gdino_original import SWINT_EMBED_DIM, convert_state_dict

    folder = tmp_path_factory.mktemp("gdino")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [str(GDINO_PYTHON), "-m", "autocomp.generation.gdino_original", str(folder), CAPTION,
         str(HEIGHT), str(WIDTH)], env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    original = dict(np.load(folder / "original.npz"))
    converted = convert_state_dict(load_file(folder / "original.safetensors"), SWINT_EMBED_DIM)
    backbone = SwinConfig(window_size=7, image_size=224, embed_dim=SWINT_EMBED_DIM,
                          depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24], out_indices=[2, 3, 4])  # fmt: skip
    text = BertConfig.from_pretrained(folder / "bert")
    port_dir = folder / "port"
    GroundingDinoConfig(backbone_config=backbone, text_config=text).save_pretrained(port_dir)
    save_file({k: v.contiguous() for k, v in converted.items()}, port_dir / "model.safetensors",
              metadata={"format": "pt"})  # fmt: skip
    model, info = GroundingDinoForObjectDetection.from_pretrained(
        port_dir, output_loading_info=True
    )
    tokenizer = BertTokenizer.from_pretrained(folder / "bert")
    ids = tokenizer([CAPTION], return_tensors="pt")
    pixels = torch.from_numpy(original["pixels"])
    with torch.inference_mode():
        out = model.eval()(pixel_values=pixels, pixel_mask=torch.ones(1, HEIGHT, WIDTH,
                           dtype=torch.long), **ids)  # fmt: skip
    return {"original": original, "port": out, "info": info, "ids": ids, "tokenizer": tokenizer}


def test_the_converted_weights_fill_the_port(runs: dict) -> None:
    info = runs["info"]
    assert not info["missing_keys"] and not info["mismatched_keys"]
    # the text backbone's pooler: the original's BertModel has one, the port's has none
    assert sorted(info["unexpected_keys"]) == [
        "model.text_backbone.pooler.dense.bias",
        "model.text_backbone.pooler.dense.weight",
    ]


def test_same_tokens(runs: dict) -> None:
    assert runs["ids"].input_ids.tolist() == runs["original"]["input_ids"].tolist()


def test_same_logits_and_boxes(runs: dict) -> None:
    original, port = runs["original"], runs["port"]
    logits = port.logits.numpy()
    assert logits.shape == original["logits"].shape == (1, 900, 256)  # max_text_len
    finite = np.isfinite(original["logits"])  # the text tokens; -inf past them, in both
    assert (np.isfinite(logits) == finite).all() and finite.any()
    diff = np.abs(logits[finite] - original["logits"][finite])
    assert diff.max() <= LOGITS_TOLERANCE, diff.max()
    assert np.abs(port.pred_boxes.numpy() - original["boxes"]).max() <= BOXES_TOLERANCE


def test_same_detections_after_our_thresholds(runs: dict) -> None:
    """The detector's post-processing (box 0.4, text 0.3) keeps the same boxes and phrases from
    the original's outputs as from the port's."""
    import torch
    from transformers import GroundingDinoImageProcessor, GroundingDinoProcessor
    from transformers.models.grounding_dino.modeling_grounding_dino import (
        GroundingDinoObjectDetectionOutput,
    )

    original, port = runs["original"], runs["port"]
    processor = GroundingDinoProcessor(
        image_processor=GroundingDinoImageProcessor(), tokenizer=runs["tokenizer"]
    )
    ids = runs["ids"].input_ids
    theirs = GroundingDinoObjectDetectionOutput(
        logits=torch.from_numpy(original["logits"]),
        pred_boxes=torch.from_numpy(original["boxes"]),
    )
    kept = [
        processor.post_process_grounded_object_detection(
            out, ids, target_sizes=[(HEIGHT, WIDTH)], **THRESHOLDS
        )[0]
        for out in (port, theirs)
    ]
    ours, orig = kept
    assert ours["text_labels"] == orig["text_labels"]
    assert ours["boxes"].shape == orig["boxes"].shape
    assert np.abs(ours["boxes"].numpy() - orig["boxes"].numpy()).max(initial=0) <= 1e-3  # pixels
