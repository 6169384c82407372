"""lmms-eval (from PyPI, in the peers environment: `make test-peers`) runs the exported task
pack with a tiny random-weight LLaVA through its own `llava_hf` class, and its per-item values
are autocomp's, item by item.

The same scoring semantics: lmms-eval's llava_hf (lmms_eval/models/simple/llava_hf.py,
`loglikelihood`) returns the model's mean token loss over the continuation, unnegated, as the
"log-likelihood" of each option; autocomp's `per_token` score is the summed caption
log-likelihood over its token count. With the prompt and chat template equal (the LLaVA below:
its template renders an assistant turn as the bare continuation, and one image token, so the
mask llava_hf computes from the unexpanded context covers exactly the context), each option's
lmms-eval value is minus autocomp's per-token score of that caption. lmms-eval picks the
highest value, i.e. the caption with the highest mean loss: the least likely one, and the test
shows it on every item (a harness rule that differs from the benchmark's: docs/harnesses.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from autocomp.config import ExportConfig, ScoreConfig
from autocomp.exports import export
from autocomp.exports.lmms_eval import MC_PROMPT
from autocomp.scoring import score
from autocomp.scoring.registry import ModelEntry
from tests.exports.conftest import build_bench

pytestmark = [pytest.mark.peers, pytest.mark.slow]

TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'assistant' %}<|im_start|>assistant\n"
    "{{ m['content'] }}{% else %}<|im_start|>{{ m['role'] }}\n{% if m['content'] is string %}"
    "{{ m['content'] }}{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
LIMIT = 3


def byte_level_tokenizer(files: Path):
    """autocomp.tiny's byte-level tokenizer (every byte one token, no merges) built the way
    this environment's transformers (4.x: from a vocab and a merges file) builds it."""
    from transformers import Qwen2Tokenizer

    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            chars.append(256 + extra)
            extra += 1
    files.mkdir(parents=True, exist_ok=True)
    (files / "vocab.json").write_text(json.dumps({chr(c): i for i, c in enumerate(chars)}))
    (files / "merges.txt").write_text("#version: 0.2\n")
    tok = Qwen2Tokenizer(
        vocab_file=str(files / "vocab.json"), merges_file=str(files / "merges.txt"),
        unk_token=None, bos_token=None, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
    )  # fmt: skip
    tok.add_special_tokens(
        {"additional_special_tokens": ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]}
    )
    return tok


def build_llava(folder: Path) -> Path:
    """A tiny random-weight LLaVA in this environment's transformers, from a config: one
    32-pixel patch (one image token), the byte-level tokenizer of autocomp.tiny."""
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = byte_level_tokenizer(folder.parent / "tokenizer-files")
    tok.chat_template = TEMPLATE
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ),
        tokenizer=tok, patch_size=32, vision_feature_select_strategy="default",
        num_additional_image_tokens=1, chat_template=TEMPLATE,
    )  # fmt: skip
    eos = tok.convert_tokens_to_ids("<|im_end|>")
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(
            image_size=32, patch_size=32, hidden_size=32, intermediate_size=64,
            num_hidden_layers=2, num_attention_heads=2, projection_dim=32,
        ),
        text_config=LlamaConfig(
            vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
            bos_token_id=eos, eos_token_id=eos,
        ),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default", vision_feature_layer=-1,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def _samples(out: Path, task: str) -> list[dict]:
    files = sorted(out.rglob(f"*samples_{task}*.jsonl"))
    assert files, f"lmms-eval logged no samples of {task} under {out}"
    return [json.loads(line) for line in files[-1].read_text().splitlines() if line.strip()]


def test_lmms_eval_runs_the_pack_and_agrees_with_autocomp_item_by_item(tmp_path):
    bench = build_bench(tmp_path / "bench", count=4)
    images = str(bench.parent / "images")
    pack = tmp_path / "pack"
    export("lmms-eval", bench, pack, ExportConfig(images=images, sets=("swap", "confusion")))
    weights = build_llava(tmp_path / "llava")
    logs = tmp_path / "logs"
    command = [
        # --force_simple: lmms-eval's chat llava_hf class has no loglikelihood; the simple one
        sys.executable, "-m", "lmms_eval", "--model", "llava_hf", "--force_simple",
        "--model_args", f"pretrained={weights},device=cpu,device_map=cpu,dtype=float32",
        "--tasks", "autocomp", "--include_path", str(pack), "--batch_size", "1",
        "--limit", str(LIMIT), "--log_samples", "--output_path", str(logs),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    # lmms-eval exits 0 after an error too: its samples are the evidence
    assert done.returncode == 0 and "Error during evaluation" not in done.stderr, done.stderr[
        -4000:
    ]
    mc = _samples(logs, "autocomp_color_mc")
    gen = _samples(logs, "autocomp_color_gen")
    assert len(mc) == LIMIT and len(gen) == LIMIT  # --limit works
    for sample in gen:
        result = sample["autocomp_acc"]
        assert -1 <= result["choice"] < 16 and result["score"] in (0.0, 1.0)

    entry = ModelEntry(
        name="peers-llava", title="tiny LLaVA (peers env)", backend="transformers_vlm",
        score="loglik", weights=str(weights), dtype="float32", gpus=0, gpu_memory_gb=0,
        trust_remote_code=False, model_class="LlavaForConditionalGeneration",
        prompt="\n" + MC_PROMPT,  # llava_hf's context: "<image>\n" + the task's prompt
    )  # fmt: skip
    score([entry], bench, tmp_path / "scores", ScoreConfig(images=images, device="cpu"))
    scores = pq.read_table(tmp_path / "scores" / "peers-llava" / "scores").to_pylist()
    per_token = {(r["sample_id"], r["candidate_index"]): r["score"] / r["tokens"] for r in scores}
    pack_rows = {
        r["question_id"]: r
        for r in pq.read_table(next((pack / "data").rglob("*.parquet"))).to_pylist()
    }
    for sample in mc:
        result = sample["autocomp_acc"]
        doc = pack_rows[f"{result['sample_id']}|{result['set']}"]
        ours = [per_token[(doc["sample_id"], c)] for c in doc["candidates"]]
        theirs = result["lls"]
        assert theirs == pytest.approx([-x for x in ours], rel=1e-4, abs=1e-5)
        # lmms-eval's choice: the highest mean loss, autocomp's least likely caption
        assert result["choice"] == min(range(len(ours)), key=lambda i: (ours[i], -i))
