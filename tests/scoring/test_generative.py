import pytest
from PIL import Image

from autocomp.scoring import ScoreRequest, generative, load_scorer

VLMS = ["tiny-qwen2.5-vl", "tiny-llava"]
CAPTIONS = [
    "A red cup and a blue lamp on a white background.",
    "A blue cup and a red lamp on a white background.",
    "A red cup and a red cup on a white background.",
    "An orange SUV.",
    "A pair of green gloves is above an umbrella, which is to the left of a chair.",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def images():
    return {
        "square": Image.new("RGB", (64, 64), (200, 30, 30)),
        "tall": Image.new("RGB", (40, 90), (30, 30, 200)),
    }


def requests():
    reqs = [ScoreRequest(key, c) for key in ("square", "tall") for c in CAPTIONS]
    return reqs + [ScoreRequest(None, c) for c in CAPTIONS[:2]]


def use_mode(scorer, mode: str, monkeypatch) -> None:
    """split: attention split over the one prefix cache (the default; "split-math" with the
    attention written out in float32, the path off CPU); repeated: the prefix cache copied per
    candidate; packed: a chunk as one row with a 4D mask."""
    scorer.split = mode.startswith("split")
    scorer.packed = mode == "packed"
    if mode == "split-math":
        monkeypatch.setattr(generative, "_flash_cpu", lambda: False)


@pytest.mark.parametrize("mode", ["split", "split-math", "repeated", "packed"])
@pytest.mark.parametrize("model", VLMS)
def test_shared_prefix_equals_naive(model, images, mode, monkeypatch):
    shared = load_scorer(model, device="cpu", chunk_size=3)
    use_mode(shared, mode, monkeypatch)
    naive = load_scorer(model, device="cpu", naive=True)
    a, b = shared.score(requests(), images), naive.score(requests(), images)
    assert max(abs(x - y) for x, y in zip(a, b)) <= 1e-4
    for start in (0, 5):  # identical argmax per image
        assert max(range(5), key=lambda i: a[start + i]) == max(
            range(5), key=lambda i: b[start + i]
        )
    # one prefix pass per distinct image (and one for the blind group)
    assert shared.calls["prefix_forwards"] == 3 and naive.calls["candidate_forwards"] == 12
    # chunks of 3: 5 captions -> 2 chunks per image, 2 blind captions -> 1 chunk
    assert shared.calls["chunks"] == 5
    assert all(s < 0 for s in a)


def test_split_attention_is_used_and_restored(images, monkeypatch):
    """The split attention runs once per layer and chunk, and the model's own attention setting
    is back afterwards (the next prefix pass must use it)."""
    scorer = load_scorer("tiny-qwen2.5-vl", device="cpu", chunk_size=4)
    calls = []
    real = generative._split_attention

    def counted(module, *args, **kwargs):
        calls.append(module.layer_idx)
        return real(module, *args, **kwargs)

    from transformers import AttentionInterface

    monkeypatch.setitem(AttentionInterface._global_mapping, generative._SPLIT, counted)
    text = scorer.model.config.get_text_config()
    before = text._attn_implementation
    scorer.score([ScoreRequest("square", c) for c in CAPTIONS], images)
    layers = text.num_hidden_layers
    assert calls == list(range(layers)) * 2  # 5 captions, chunks of 4: 2 chunks
    assert text._attn_implementation == before


def test_a_window_shorter_than_the_context_falls_back_to_the_repeated_cache(images, monkeypatch):
    """A sliding-window layer that would cut into the prefix cannot use the split attention
    (it attends to the whole prefix); the chunk runs over a repeated cache, same scores."""
    scorer = load_scorer("tiny-llava", device="cpu", chunk_size=2)
    reference = scorer.score(requests(), images)
    real = generative._split_attention

    def windowed(*args, **kwargs):
        return real(*args, **{**kwargs, "sliding_window": 8})

    from transformers import AttentionInterface

    monkeypatch.setitem(AttentionInterface._global_mapping, generative._SPLIT, windowed)
    got = scorer.score(requests(), images)
    assert scorer.split is False
    assert max(abs(x - y) for x, y in zip(got, reference)) <= 1e-4


@pytest.mark.parametrize("model", VLMS)
def test_blind_scores_ignore_the_image(model, images):
    scorer = load_scorer(model, device="cpu")
    blind = scorer.score([ScoreRequest(None, c) for c in CAPTIONS], images)
    seen = scorer.score([ScoreRequest("square", c) for c in CAPTIONS], images)
    assert blind != seen
    assert blind == scorer.score([ScoreRequest(None, c) for c in CAPTIONS], {})


def test_out_of_memory_halves_the_chunk_and_retries(images, monkeypatch):
    scorer = load_scorer("tiny-llava", device="cpu", chunk_size=4)
    reference = load_scorer("tiny-llava", device="cpu", naive=True).score(requests(), images)
    real_chunk = scorer._chunk

    def tight(prefix, cache, last, rope, ids):
        if len(ids) > 1:  # what a GPU without room for two sequences would say
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_chunk(prefix, cache, last, rope, ids)

    monkeypatch.setattr(scorer, "_chunk", tight)
    got = scorer.score(requests(), images)
    assert scorer.chunk_size == 1
    assert max(abs(x - y) for x, y in zip(got, reference)) <= 1e-4


def test_other_errors_are_not_swallowed(images, monkeypatch):
    scorer = load_scorer("tiny-llava", device="cpu")

    def broken(*args):
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(scorer, "_chunk", broken)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        scorer.score(requests(), images)


def test_score_stage_with_a_generative_model(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from autocomp.config import NegativesConfig, ScoreConfig
    from autocomp.protocol.stages import negatives_stage, sample_stage
    from autocomp.scoring.registry import get_model
    from autocomp.scoring.stage import score_stage

    sample_stage("position", 3, 2, 0, tmp_path / "c.parquet")
    negatives_stage(tmp_path / "c.parquet", tmp_path / "b.parquet", NegativesConfig(workers=1))
    table = pq.read_table(tmp_path / "b.parquet")
    for i in range(table.num_rows):
        Image.new("RGB", (50, 50), (40 * i, 90, 10)).save(tmp_path / f"{i}.png")
    table = table.append_column("image", pa.array([f"{i}.png" for i in range(table.num_rows)]))
    pq.write_table(table, tmp_path / "bench.parquet")
    entry = get_model("tiny-qwen2.5-vl")
    summary = score_stage(entry, tmp_path / "bench.parquet", tmp_path / "run",
                          ScoreConfig(str(tmp_path), device="cpu"))  # fmt: skip
    rows = {(r["set"], r["protocol"]): r for r in summary.to_pylist()}
    assert rows[("confusion", "paper")]["items"] == 2
    assert rows[("confusion", "paper")]["chance"] == pytest.approx(1 / 108)
    blind = score_stage(entry, tmp_path / "bench.parquet", tmp_path / "blind",
                        ScoreConfig(blind=True, device="cpu"))  # fmt: skip
    assert blind.num_rows == summary.num_rows


@pytest.mark.parametrize("model", VLMS)
def test_benchmark_baseline_equals_the_shared_path(model, images):
    """benchmarks/scoring_throughput.py's fair baseline (candidates batched, each row the whole
    prefix, no cache) gives the shared path's scores: captions of different lengths, chunks
    crossing the candidate list (7 captions, batches of 3)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from scoring_throughput import batched_no_sharing

    scorer = load_scorer(model, device="cpu", chunk_size=3)
    captions = CAPTIONS + ["A cat.", "Two green cubes to the left of a red sphere."]
    prefix = scorer._prefix_inputs(images["tall"])
    baseline = batched_no_sharing(scorer, prefix, scorer._caption_ids(captions), 3)
    shared = scorer.score([ScoreRequest("tall", c) for c in captions], images)
    assert max(abs(x - y) for x, y in zip(shared, baseline)) <= 1e-4
    assert scorer.calls["chunks"] == 3


def test_chunks_grow_on_a_gpu_with_free_memory_until_an_out_of_memory(monkeypatch):
    """On a GPU a chunk holds what a quarter of the free memory holds (never fewer than
    chunk_size, never more than the candidates); after an out-of-memory it stays shrunk."""
    import torch

    scorer = load_scorer("tiny-llava", device="cpu", chunk_size=4)
    ids = [[1] * 10] * 500
    assert scorer._chunk_limit(ids, 600) == 4  # CPU: chunk_size
    scorer.device = "cuda"
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (8 << 30, 16 << 30))
    assert scorer._chunk_limit(ids, 600) == 500  # 2 GiB hold all 500 tiny-model candidates
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (1 << 20, 16 << 30))
    assert scorer._chunk_limit(ids, 600) == 4  # 1 MiB free: no growth below chunk_size
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (64 << 20, 16 << 30))
    fits = scorer._chunk_limit(ids, 600)
    assert 4 < fits < 500
    scorer.grow = False  # what an out-of-memory error sets
    assert scorer._chunk_limit(ids, 600) == 4


@pytest.mark.parametrize("model", VLMS)
def test_captions_are_tokenized_once_per_scorer_with_the_same_scores(model, images):
    """A scorer (one pod) tokenizes each caption once across its calls (every item and part
    of a family:N repeats its candidates): the ids are the tokenizer's own for the caption
    alone, and the scores' bytes are those of the call that tokenized them."""
    import struct

    scorer = load_scorer(model, device="cpu")
    first = scorer.score(requests(), images)
    assert scorer.calls["tokenized"] == len(CAPTIONS)
    again = scorer.score(list(reversed(requests())), images)[::-1]
    assert scorer.calls["tokenized"] == len(CAPTIONS)  # nothing tokenized the second time
    assert struct.pack(f"{len(first)}d", *first) == struct.pack(f"{len(again)}d", *again)
    tokenizer = scorer.processor.tokenizer
    for caption in CAPTIONS:
        alone = tokenizer(caption, add_special_tokens=False).input_ids
        assert scorer.caption_tokens[caption] == alone
    assert scorer.token_counts(CAPTIONS[:2]) == [
        len(scorer.caption_tokens[c]) for c in CAPTIONS[:2]
    ]
