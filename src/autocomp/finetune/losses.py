"""Hard-negative augmented contrastive losses (paper A.9).

Inputs are L2-normalised embeddings: `images` [B, D], `texts` [B, D] (row i is image i's
caption) and `hard` [B*K, D] (rows i*K .. i*K+K-1 are image i's hard negatives).

- `negclip_loss` (NegCLIP, Yuksekgonul et al. 2023): the CLIP InfoNCE whose image->text softmax
  runs over the B in-batch captions plus all B*K hard negatives; text->image is unchanged.
  With K=0 it is exactly the CLIP loss.
- `sigmoid_hard_loss` (SigLIP, Zhai et al. 2023, adapted the same way): every image against the
  B captions and the B*K hard negatives, label +1 for its own caption and -1 for every other
  text, loss -sum log sigmoid(label * (t * cos + b)) / B, with t = exp(logit_scale) and bias b
  both trainable. With K=0 it is exactly the SigLIP loss.
"""

from __future__ import annotations

from typing import Any


def negclip_loss(images: Any, texts: Any, hard: Any, logit_scale: Any) -> Any:
    import torch
    import torch.nn.functional as F

    scale = logit_scale.exp()
    candidates = torch.cat([texts, hard]) if hard.numel() else texts
    labels = torch.arange(images.shape[0], device=images.device)
    image_to_text = scale * images @ candidates.T
    text_to_image = scale * texts @ images.T
    return (F.cross_entropy(image_to_text, labels) + F.cross_entropy(text_to_image, labels)) / 2


def sigmoid_hard_loss(images: Any, texts: Any, hard: Any, logit_scale: Any, logit_bias: Any) -> Any:
    import torch
    import torch.nn.functional as F

    candidates = torch.cat([texts, hard]) if hard.numel() else texts
    logits = logit_scale.exp() * images @ candidates.T + logit_bias
    batch = images.shape[0]
    labels = -torch.ones_like(logits)
    labels[:, :batch] += 2 * torch.eye(batch, device=logits.device, dtype=logits.dtype)
    return -F.logsigmoid(labels * logits).sum() / batch


def contrastive_loss(
    score: str, images: Any, texts: Any, hard: Any, logit_scale: Any, logit_bias: Any = None
) -> Any:
    """The loss of a model family: cosine (CLIP) -> NegCLIP; sigmoid (SigLIP) -> sigmoid."""
    if score == "sigmoid":
        return sigmoid_hard_loss(images, texts, hard, logit_scale, logit_bias)
    return negclip_loss(images, texts, hard, logit_scale)
