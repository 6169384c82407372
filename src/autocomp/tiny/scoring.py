"""Tiny random-weight variants of each backend, built from a config and saved to disk.

They let every scoring path run on a CPU with no download: the weights are built once (seeded),
saved the way real weights are stored, and then loaded back by the production loader.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from autocomp.errors import root_filter
from autocomp.store.atomic import atomic_path
from autocomp.tiny.common import CHAT_TEMPLATE, build_once, byte_level_tokenizer, cache_dir

TINY_CONFIGS = Path(__file__).parent / "configs"


class _NoRandomInitWarning(logging.Filter):
    """Drops exactly open_clip's "No pretrained weights loaded for model '<arch>'" record."""

    def __init__(self, architecture: str) -> None:
        super().__init__()
        self.message = f"No pretrained weights loaded for model '{architecture}'."

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(self.message)


@contextlib.contextmanager
def _quiet_random_init(architecture: str) -> Iterator[None]:
    """Silence open_clip's warning that a tiny model was initialised randomly (logged on the
    root logger), and nothing else, while it builds."""
    with root_filter(_NoRandomInitWarning(architecture)):
        yield


def register_open_clip_configs() -> None:
    import open_clip

    open_clip.add_model_config(TINY_CONFIGS)


def ensure_open_clip_weights(entry: Any) -> Path:
    """Build (once) and save the tiny open_clip model's state dict; return the file."""
    import open_clip
    import torch

    register_open_clip_configs()
    path = cache_dir() / entry.name / "open_clip_model.safetensors"
    if path.is_file():
        return path
    from safetensors.torch import save_file

    torch.manual_seed(0)
    with _quiet_random_init(entry.architecture):  # random weights are the point here
        model = open_clip.create_model(entry.architecture, pretrained=None).eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:  # the last of two concurrent identical builds wins
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp))
    return path


# ----------------------------------------------------------------------------- VLMs


# Text sizes of the tiny VLMs: hidden size, attention heads, K/V heads (head_dim = hidden /
# heads). The `_vllm` variants have head_dim 64: vLLM's CPU attention kernel rejects smaller
# heads (the plain ones' head_dim is 8), so the vLLM scoring engine is held to them.
SMALL = (32, 4, 2)
HEAD64 = (128, 2, 1)


def _build_qwen2_5_vl(
    folder: Path, sizes: tuple[int, int, int] = SMALL, layers: int = 2, pixels: int = 56 * 56
) -> None:
    """A tiny Qwen2.5-VL: text `sizes` x `layers`, a one-block vision tower; an image is resized
    to at most `pixels` (56 x 56: 4 image tokens; benchmarks/vllm_scoring.py widens it)."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]  # fmt: skip
    tok = byte_level_tokenizer(specials)
    ids = {s: tok.convert_tokens_to_ids(s) for s in specials}
    image_processor = Qwen2VLImageProcessor(
        min_pixels=56 * 56, max_pixels=pixels, patch_size=14, merge_size=2, temporal_patch_size=2
    )
    processor = Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=Qwen2VLVideoProcessor(),
        chat_template=CHAT_TEMPLATE.replace("IMAGE", "<|vision_start|><|image_pad|><|vision_end|>"),
    )
    hidden, heads, kv_heads = sizes
    half = hidden // heads // 2  # rotary pairs per head, split over (time, height, width)
    # bos/eos_token_id reach PreTrainedConfig through **kwargs, which its type leaves out
    config = Qwen2_5_VLConfig(  # type: ignore[call-arg]
        text_config={
            "vocab_size": len(tok), "hidden_size": hidden, "intermediate_size": 2 * hidden,
            "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": kv_heads,
            "rope_scaling": {"type": "mrope", "mrope_section": [half // 4, half // 4,
                                                               half - 2 * (half // 4)]},
            "max_position_embeddings": 4096, "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
        },
        vision_config={
            "depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
            "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
            "out_hidden_size": hidden, "window_size": 28, "fullatt_block_indexes": [0],
        },
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
    )  # fmt: skip
    _save(Qwen2_5_VLForConditionalGeneration, config, processor, folder)


def _build_llava(folder: Path, sizes: tuple[int, int, int] = SMALL) -> None:
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = byte_level_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"])
    image_processor = CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE.replace("IMAGE", "<image>"),
    )
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    hidden, heads, kv_heads = sizes
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            image_size=32, patch_size=8, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=2, projection_dim=32,
        ),
        text_config=LlamaConfig(
            vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
            num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv_heads,
            max_position_embeddings=4096,
            bos_token_id=eos, eos_token_id=eos,
        ),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )  # fmt: skip
    _save(LlavaForConditionalGeneration, config, processor, folder, LLAVA_HUB_LAYOUT)


def _build_qwen2_text(folder: Path, sizes: tuple[int, int, int] = HEAD64, layers: int = 2) -> None:
    """A text-only Qwen2 (head_dim 64) whose processor is its tokenizer, with one merge (two
    newlines): the chat prefix ends with a newline, so a caption that starts with one is
    tokenised differently together with the prefix than on its own, and the scoring engines
    must score it on its own (the vLLM scoring engine's boundary case)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = byte_level_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"], (("Ċ", "Ċ"),))
    tok.chat_template = CHAT_TEMPLATE.replace("IMAGE", "")
    hidden, heads, kv_heads = sizes
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        max_position_embeddings=4096, bos_token_id=eos, eos_token_id=eos,
    )  # fmt: skip
    _save(Qwen2ForCausalLM, config, tok, folder)


# The key layout of the published llava-hf checkpoints (llava-hf/llava-1.5-7b-hf): their CLIP
# tower's keys sit under `vision_tower.vision_model.`. transformers 5.19+ flattened CLIPVisionModel
# and saves them as `vision_tower.` (it still loads the published layout, by a PrefixChange in its
# conversion_mapping.py); vLLM 0.32's LLaVA loader knows only the published layout ("There is no
# module or parameter named 'vision_tower.embeddings'"). The tiny LLaVA is saved as the hub's are.
LLAVA_HUB_LAYOUT = (("vision_tower.", "vision_tower.vision_model."),)


def _hub_layout(folder: Path, renames: tuple[tuple[str, str], ...]) -> None:
    """Rename the saved weights' keys to the published checkpoints' layout (a key already in
    it is left alone); the tensors are unchanged."""
    from safetensors.torch import load_file, save_file

    for path in sorted(folder.glob("*.safetensors")):
        tensors = load_file(str(path))
        renamed = {}
        for key, tensor in tensors.items():
            for old, new in renames:
                if key.startswith(old) and not key.startswith(new):
                    key = new + key[len(old) :]
            renamed[key] = tensor
        save_file(renamed, str(path), metadata={"format": "pt"})


def _save(
    model_class: type,
    config: object,
    processor: Any,
    folder: Path,
    renames: tuple[tuple[str, str], ...] = (),
) -> None:

    import torch

    torch.manual_seed(0)
    model = model_class(config).eval()

    def save(tmp: Path) -> None:
        model.save_pretrained(tmp)
        processor.save_pretrained(tmp)
        if renames:
            _hub_layout(tmp, renames)

    build_once(folder, save)


VLM_BUILDERS: dict[str, Callable[[Path], None]] = {
    "qwen2_5_vl": _build_qwen2_5_vl,
    "llava": _build_llava,
    "qwen2_5_vl_vllm": functools.partial(_build_qwen2_5_vl, sizes=HEAD64),
    "llava_vllm": functools.partial(_build_llava, sizes=HEAD64),
    "qwen2_text_vllm": _build_qwen2_text,
}


def ensure_vlm(entry: Any) -> Path:
    """Build (once) and save a tiny VLM and its processor; return the from_pretrained folder."""
    folder = cache_dir() / entry.name
    if not (folder / "config.json").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        VLM_BUILDERS[str(entry.raw["tiny_config"])](folder)
    return folder
