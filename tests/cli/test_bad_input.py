"""The bad-input corpus: every verb, given bad input, exits 2 with exactly one line on stderr that
names the input, the value and the fix; no traceback; nothing left at the output path.

Each case is (argv, words the error line must contain). In argv, `{d}` is a folder of prepared
inputs (good and bad tables, folders, CSVs) and `{out}` is the output path, which must not exist
after the failed call. Add cases with every new verb.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.cli.main import main
from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage
from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA


def _rewrite(src: Path, dst: Path, fn) -> None:  # noqa: ANN001
    table = pq.read_table(src)
    pq.write_table(fn(table), dst)


def _set(table: pa.Table, name: str, values: list) -> pa.Table:
    i = table.schema.get_field_index(name)
    return table.set_column(i, name, pa.array(values, table.schema.field(name).type))


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    """Prepared inputs: good tables, damaged tables, folders, CSVs and a run folder."""
    d = tmp_path_factory.mktemp("inputs")
    sample_stage("color", 2, 4, 0, d / "concepts.parquet")
    negatives_stage(d / "concepts.parquet", d / "bench.parquet", NegativesConfig(workers=1))
    (d / "text.parquet").write_text("not a parquet file")
    (d / "notes.txt").write_text("plain text")
    data = (d / "bench.parquet").read_bytes()
    (d / "truncated.parquet").write_bytes(data[: len(data) // 2])
    corrupt = bytearray(data)
    for i in range(200, min(len(corrupt) - 200, 2000)):  # pages, not the footer
        corrupt[i] ^= 0x5A
    (d / "corrupt.parquet").write_bytes(bytes(corrupt))
    pq.write_table(pa.table({"x": [1, 2]}), d / "other.parquet")
    n = pq.read_table(d / "concepts.parquet").num_rows
    _rewrite(d / "concepts.parquet", d / "null_objects.parquet",
             lambda t: _set(t, "objects", [None] + [["cup", "lamp"]] * (n - 1)))  # fmt: skip
    _rewrite(d / "concepts.parquet", d / "n_mismatch.parquet",
             lambda t: _set(t, "n", [3] * n))  # fmt: skip
    _rewrite(d / "concepts.parquet", d / "n_null.parquet",
             lambda t: t.set_column(t.schema.get_field_index("n"), "n",
                                    pa.array([None] * n, pa.float64())))  # fmt: skip
    _rewrite(d / "concepts.parquet", d / "oov.parquet",
             lambda t: _set(t, "objects", [["spaceship", "lamp"]] * n))  # fmt: skip
    _rewrite(d / "concepts.parquet", d / "null_caption.parquet",
             lambda t: _set(t, "minimal_caption", [None] * n))  # fmt: skip
    _rewrite(d / "concepts.parquet", d / "unknown_family.parquet",
             lambda t: _set(t, "family", ["glitter"] * n))  # fmt: skip
    bench = pq.read_table(d / "bench.parquet")
    images = d / "images"
    images.mkdir()
    names = []
    for i in range(bench.num_rows):
        Image.new("RGB", (16, 16), (10 * i, 0, 0)).save(images / f"{i}.png")
        names.append(f"{i}.png")
    with_images = bench.append_column("image", pa.array(names))
    pq.write_table(with_images, d / "bench_images.parquet")
    ids = with_images.column("concept_id").to_pylist()
    dup = with_images.append_column("sample_id", pa.array([ids[0]] * len(ids)))
    pq.write_table(dup, d / "dup_ids.parquet")
    keyed = pa.concat_tables(
        with_images.append_column(
            "sample_id", pa.array([f"{i}/{cond}" for i in ids])
        ).append_column("condition", pa.array([cond] * len(ids)))
        for cond in ("minimal", "contextual")
    )
    escape = _set(keyed, "image", ["../../../../etc/passwd"] * keyed.num_rows)
    pq.write_table(escape, d / "escape.parquet")
    (d / "empty_dir").mkdir()
    (d / "a_file").write_text("x")
    release = {"objects": [["Chair", "Cup"]], "colors": [["red", "blue"]],
               "handmade_caption": ["a red chair, and a blue cup on a white background."],
               "llm_caption": ["A red chair by a blue cup."],
               "handmade_image": ["h/1.png"], "llm_image": ["l/1.png"]}  # fmt: skip
    pq.write_table(pa.table(release), d / "release_paths.parquet")
    escaping = {**release, "llm_image": ["../../../../etc/passwd"]}
    pq.write_table(pa.table(escaping), d / "release_escape.parquet")
    pq.write_table(
        pa.table({k: release[k] for k in ("objects", "colors")}), d / "release_cols.parquet"
    )
    (d / "sugar_bad.json").write_text("{not json")
    item = {"caption": "a cat", "negative_caption": "a dog"}
    (d / "sugar_escape.json").write_text(
        '{"1": {"filename": "../../../../etc/passwd", "caption": "a", "negative_caption": "b"}}'
    )
    (d / "sugar_missing.json").write_text(json.dumps({"1": {"filename": "nope.jpg", **item}}))

    def run_folder(name: str, record: str) -> Path:
        run = d / name
        (run / "results" / "m" / "predictions").mkdir(parents=True)
        pq.write_table(bench, run / "benchmark.parquet")
        empty = PREDICTIONS_SCHEMA.empty_table()
        pq.write_table(empty, run / "results" / "m" / "predictions" / "part-00000.parquet")
        (run / "results" / "m" / "run.json").write_text(record)
        return run

    run_folder("run", "{not json")
    run_folder("good_run", "{}")
    for name, body in {
        "latin1": "annotator,sample_id,task,answer\nA,x,valid,caf\xe9\n".encode("latin-1"),
        "short": b"annotator,sample_id,task,answer\nA,x\n",
        "nocols": b"who,what\nA,x\n",
    }.items():
        run = run_folder(f"human_{name}", "{}")
        (run / "human").mkdir()
        (run / "human" / "a.csv").write_bytes(body)
    (d / "registry.yaml").write_text("models: [\n  {name: x\n")
    _score_inputs(d, with_images, keyed)
    import os
    import subprocess
    import sys

    lock = d / "lock.json"  # compile for a cluster names pushed images: pin them as make push does
    lock.write_text(json.dumps({k: {"image": f"r.test/autocomp-{k}:1", "digest": "sha256:" + "a" * 64}
                                for k in ("core", "gpu", "caption")}))  # fmt: skip
    subprocess.run([sys.executable, "-m", "autocomp.cli.main", "compile", "--out", str(d / "dist")],
                   check=True, capture_output=True,
                   env={**os.environ, "AUTOCOMP_IMAGE_LOCK": str(lock)})  # fmt: skip
    return d


def _score_inputs(d: Path, with_images: pa.Table, keyed: pa.Table) -> None:
    """`score` inputs: a folder of mixed parts, a store, a scored folder, model folders."""
    import json

    from autocomp.scoring.registry import get_model
    from autocomp.store.publish import publish_stage
    from autocomp.store.storage import file_sha256

    (d / "mixed").mkdir()
    pq.write_table(with_images, d / "mixed" / "a.parquet")
    pq.write_table(with_images.drop_columns(["image"]), d / "mixed" / "b.parquet")
    pq.write_table(keyed, d / "keyed.parquet")
    publish_stage(d / "keyed.parquet", d / "images", d / "published", str(d / "store"), "run-1")
    record = {"model": "tiny-clip", "entry": get_model("tiny-clip").record(), "blind": False,
              "benchmark_sha": file_sha256(d / "bench_images.parquet"), "limit": 3}  # fmt: skip
    (d / "scored" / "tiny-clip").mkdir(parents=True)
    (d / "scored" / "tiny-clip" / "run.json").write_text(json.dumps(record))
    vlm = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
           "vision_config": {}}  # fmt: skip
    (d / "vlm").mkdir()
    (d / "vlm" / "config.json").write_text(json.dumps(vlm))
    other = {**record, "model": "hf-vlm", "limit": None,
             "entry": {"name": "hf-vlm", "weights": "/elsewhere/vlm", "spec": "hf:/elsewhere/vlm"}}  # fmt: skip
    (d / "scored" / "hf-vlm").mkdir()
    (d / "scored" / "hf-vlm" / "run.json").write_text(json.dumps(other))
    (d / "oldrun").mkdir()
    (d / "oldrun" / "run.json").write_text(json.dumps(record))
    configs = {
        "hf_clip": ("config.json", {"architectures": ["CLIPModel"], "model_type": "clip"}),
        "hf_llm": ("config.json", {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}),
        "oc_noweights": ("open_clip_config.json", {"model_cfg": {"embed_dim": 8}}),
    }
    for folder, (name, config) in configs.items():
        (d / folder).mkdir()
        (d / folder / name).write_text(json.dumps(config))


V = "{d}"
S = ["score", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images"]
CASES: list[tuple[str, list[str], list[str]]] = [
    # ------------------------------------------------------------------ families / models
    ("families-extra", ["families", "--bogus"], ["--bogus"]),
    ("models-extra", ["models", "extra"], ["extra"]),
    # ------------------------------------------------------------------ sample
    ("sample-family", ["sample", "--family", "colour", "--n", "2", "--count", "2", "--out", "{out}.parquet"], ["--family", "colour", "color"]),
    ("sample-n-high", ["sample", "--family", "color", "--n", "9", "--count", "2", "--out", "{out}.parquet"], ["--n", "9"]),
    ("sample-n-zero", ["sample", "--family", "color", "--n", "0", "--count", "2", "--out", "{out}.parquet"], ["--n", "0"]),
    ("sample-n-text", ["sample", "--family", "color", "--n", "two", "--count", "2", "--out", "{out}.parquet"], ["--n", "two"]),
    ("sample-count-zero", ["sample", "--family", "color", "--n", "2", "--count", "0", "--out", "{out}.parquet"], ["--count", "0"]),
    ("sample-count-neg", ["sample", "--family", "color", "--n", "2", "--count", "-5", "--out", "{out}.parquet"], ["--count", "-5"]),
    ("sample-count-huge", ["sample", "--family", "color", "--n", "1", "--count", "100000", "--out", "{out}.parquet"], ["--count", "100000"]),
    ("sample-seed-neg", ["sample", "--family", "color", "--n", "2", "--count", "2", "--seed", "-1", "--out", "{out}.parquet"], ["--seed", "-1"]),
    ("sample-out-suffix", ["sample", "--family", "color", "--n", "2", "--count", "2", "--out", "{out}.csv"], ["--out", ".parquet"]),
    ("sample-out-under-file", ["sample", "--family", "color", "--n", "2", "--count", "2", "--out", V + "/notes.txt/x/y.parquet"], ["--out", "lies under", "notes.txt", "is a file"]),
    ("sample-out-folder", ["sample", "--family", "color", "--n", "2", "--count", "2", "--out", V + "/empty_dir"], ["--out", "empty_dir"]),
    ("sample-out-under-file", ["sample", "--family", "color", "--n", "2", "--count", "2", "--out", V + "/a_file/x.parquet"], ["a_file"]),
    ("sample-out-unwritable", ["sample", "--family", "color", "--n", "2", "--count", "2", "--out", "/sys/autocomp-x.parquet"], ["/sys/autocomp-x.parquet"]),
    ("sample-no-family", ["sample", "--n", "2", "--count", "2", "--out", "{out}.parquet"], ["--family"]),
    ("sample-out-exists", ["sample", "--family", "color", "--n", "2", "--count", "2", "--out", V + "/concepts.parquet"], ["--out", "exists", "--force"]),
    # ------------------------------------------------------------------ negatives
    ("neg-missing", ["negatives", "--input", V + "/none.parquet", "--out", "{out}.parquet"], ["--input", "none.parquet"]),
    ("neg-text", ["negatives", "--input", V + "/text.parquet", "--out", "{out}.parquet"], ["--input", "text.parquet"]),
    ("neg-notes", ["negatives", "--input", V + "/notes.txt", "--out", "{out}.parquet"], ["--input", "notes.txt"]),
    ("neg-truncated", ["negatives", "--input", V + "/truncated.parquet", "--out", "{out}.parquet"], ["--input", "truncated.parquet"]),
    ("neg-corrupt", ["negatives", "--input", V + "/corrupt.parquet", "--out", "{out}.parquet"], ["corrupt.parquet"]),
    ("neg-other", ["negatives", "--input", V + "/other.parquet", "--out", "{out}.parquet"], ["--input", "missing column"]),
    ("neg-benchmark", ["negatives", "--input", V + "/bench.parquet", "--out", "{out}.parquet"], ["--input", "benchmark table"]),
    ("neg-null-objects", ["negatives", "--input", V + "/null_objects.parquet", "--out", "{out}.parquet"], ["--input", "objects", "null"]),
    ("neg-n-mismatch", ["negatives", "--input", V + "/n_mismatch.parquet", "--out", "{out}.parquet"], ["--input", "n"]),
    ("neg-n-null", ["negatives", "--input", V + "/n_null.parquet", "--out", "{out}.parquet"], ["--input", "n"]),
    ("neg-oov", ["negatives", "--input", V + "/oov.parquet", "--out", "{out}.parquet"], ["--input", "spaceship"]),
    ("neg-null-caption", ["negatives", "--input", V + "/null_caption.parquet", "--out", "{out}.parquet"], ["--input", "caption"]),
    ("neg-unknown-family", ["negatives", "--input", V + "/unknown_family.parquet", "--out", "{out}.parquet"], ["glitter"]),
    ("neg-same-file", ["negatives", "--input", V + "/concepts.parquet", "--out", V + "/concepts.parquet"], ["--out", "--input"]),
    ("neg-workers-neg", ["negatives", "--input", V + "/concepts.parquet", "--out", "{out}.parquet", "--workers", "-3"], ["--workers", "-3"]),
    ("neg-workers-zero", ["negatives", "--input", V + "/concepts.parquet", "--out", "{out}.parquet", "--workers", "0"], ["--workers", "0"]),
    ("neg-batch-zero", ["negatives", "--input", V + "/concepts.parquet", "--out", "{out}.parquet", "--batch-size", "0"], ["--batch-size", "0"]),
    ("neg-protocol", ["negatives", "--input", V + "/concepts.parquet", "--out", "{out}.parquet", "--protocol", "loose"], ["--protocol", "loose"]),
    ("neg-out-suffix", ["negatives", "--input", V + "/concepts.parquet", "--out", "{out}.txt"], ["--out", ".parquet"]),
    ("neg-out-under-file", ["negatives", "--input", V + "/concepts.parquet", "--out", V + "/notes.txt/b.parquet"], ["--out", "lies under"]),
    ("neg-out-nodir-fails-later", ["negatives", "--input", V + "/oov.parquet", "--out", "{out}/a/b.parquet"], ["spaceship"]),
    ("neg-out-unwritable", ["negatives", "--input", V + "/concepts.parquet", "--out", "/sys/autocomp-n.parquet"], ["/sys/autocomp-n.parquet"]),
    ("neg-out-exists", ["negatives", "--input", V + "/concepts.parquet", "--out", V + "/bench.parquet"], ["--out", "exists"]),
    # ------------------------------------------------------------------ caption
    ("cap-missing", ["caption", "--concepts", V + "/none.parquet", "--out", "{out}", "--profile", "tiny"], ["--concepts", "none.parquet"]),
    ("cap-wrong-table", ["caption", "--concepts", V + "/other.parquet", "--out", "{out}", "--profile", "tiny"], ["--concepts", "missing column"]),
    ("cap-text", ["caption", "--concepts", V + "/text.parquet", "--out", "{out}", "--profile", "tiny"], ["--concepts", "text.parquet"]),
    ("cap-captioner", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--captioner", "gpt-9"], ["--captioner", "gpt-9"]),
    ("cap-engine", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--engine", "tgi"], ["--engine", "tgi"]),
    ("cap-batch-zero", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--batch-size", "0"], ["--batch-size", "0"]),
    ("cap-shards-zero", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--num-shards", "0"], ["--num-shards", "0"]),
    ("cap-shard-range", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--num-shards", "2", "--shard", "5"], ["--shard", "5"]),
    ("cap-shard-neg", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--shard", "-1"], ["--shard", "-1"]),
    ("cap-fallback", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--fallback", "any"], ["--fallback", "any"]),
    ("cap-set-form", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--set", "temperature"], ["--set", "key=value"]),
    ("cap-set-key", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--set", "temp=1"], ["--set", "temp=1", "unknown"]),
    ("cap-set-type", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--set", "temperature=hot"], ["--set", "temperature", "number"]),
    ("cap-set-yaml", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--set", "top_p=[1"], ["--set", "top_p"]),
    ("cap-profile", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "fast"], ["--profile", "fast"]),
    ("cap-out-file", ["caption", "--concepts", V + "/concepts.parquet", "--out", V + "/a_file", "--profile", "tiny"], ["--out", "a_file"]),
    ("cap-out-under-file", ["caption", "--concepts", V + "/concepts.parquet", "--out", V + "/a_file/x/y", "--profile", "tiny"], ["--out", "lies under"]),
    ("cap-seed", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--seed", "x"], ["--seed", "x"]),
    ("cap-null", ["caption", "--concepts", V + "/null_objects.parquet", "--out", "{out}", "--profile", "tiny"], ["--concepts", "objects", "null"]),
    ("cap-device", ["caption", "--concepts", V + "/concepts.parquet", "--out", "{out}", "--profile", "tiny", "--device", "tpu"], ["--device", "tpu"]),
    # ------------------------------------------------------------------ render
    ("ren-missing", ["render", "--captions", V + "/nowhere", "--out", "{out}", "--profile", "tiny"], ["--captions", "nowhere"]),
    ("ren-empty", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "tiny"], ["--captions", "empty_dir"]),
    ("ren-file", ["render", "--captions", V + "/notes.txt", "--out", "{out}", "--profile", "tiny"], ["--captions", "notes.txt"]),
    ("ren-renderer", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--renderer", "dalle"], ["--renderer", "dalle"]),
    ("ren-batch", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--batch-size", "0"], ["--batch-size", "0"]),
    ("ren-set-key", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--set", "steps=3"], ["--set", "steps=3"]),
    ("ren-set-type", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--set", "num_inference_steps=many"], ["--set", "num_inference_steps"]),
    ("ren-set-neg", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--set", "num_inference_steps=-4"], ["--set", "num_inference_steps"]),
    ("ren-shards", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--num-shards", "-2"], ["--num-shards", "-2"]),
    ("ren-shard", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--shard", "3"], ["--shard", "3"]),
    ("ren-out-file", ["render", "--captions", V + "/empty_dir", "--out", V + "/a_file", "--profile", "tiny"], ["--out", "a_file"]),
    ("ren-profile", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "huge"], ["--profile", "huge"]),
    ("ren-device", ["render", "--captions", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--device", "gpu0"], ["--device", "gpu0"]),
    # ------------------------------------------------------------------ validate
    ("val-missing", ["validate", "--render", V + "/nowhere", "--out", "{out}", "--profile", "tiny"], ["--render", "nowhere"]),
    ("val-empty", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--profile", "tiny"], ["--render", "empty_dir"]),
    ("val-detector", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--detector", "yolo"], ["--detector", "yolo"]),
    ("val-segmenter", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--segmenter", "sam9"], ["--segmenter", "sam9"]),
    ("val-vqa-clip", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--vqa", "tiny-clip"], ["--vqa", "generative VLM"]),
    ("val-vqa-unknown", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--vqa", "gpt-v"], ["--vqa", "gpt-v"]),
    ("val-masks", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--masks", "circles"], ["--masks", "circles"]),
    ("val-batch", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--batch-size", "-1"], ["--batch-size", "-1"]),
    ("val-set-type", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--set", "detector.box_threshold=high"], ["--set", "box_threshold"]),
    ("val-set-range", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--set", "detector.box_threshold=7"], ["--set", "box_threshold"]),
    ("val-set-role", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--set", "box_threshold=0.3"], ["--set", "box_threshold"]),
    ("val-shard", ["validate", "--render", V + "/empty_dir", "--out", "{out}", "--profile", "tiny", "--shard", "4", "--num-shards", "2"], ["--shard", "4"]),
    ("val-out-file", ["validate", "--render", V + "/empty_dir", "--out", V + "/a_file", "--profile", "tiny"], ["--out", "a_file"]),
    ("val-render-file", ["validate", "--render", V + "/text.parquet", "--out", "{out}", "--profile", "tiny"], ["--render", "text.parquet"]),
    # ------------------------------------------------------------------ curate
    ("cur-render", ["curate", "--render", V + "/nowhere", "--verdicts", V + "/empty_dir", "--out", "{out}"], ["--render", "nowhere"]),
    ("cur-verdicts", ["curate", "--render", V + "/empty_dir", "--verdicts", V + "/nowhere", "--out", "{out}"], ["--render", "empty_dir"]),
    ("cur-out-file", ["curate", "--render", V + "/empty_dir", "--verdicts", V + "/empty_dir", "--out", V + "/a_file"], ["a_file"]),
    ("cur-render-text", ["curate", "--render", V + "/text.parquet", "--verdicts", V + "/empty_dir", "--out", "{out}"], ["--render", "text.parquet"]),
    ("cur-no-verdicts", ["curate", "--render", V + "/empty_dir", "--out", "{out}"], ["--verdicts"]),
    # ------------------------------------------------------------------ score
    ("score-model", ["score", "--model", "clip-vit-z", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", "{out}"], ["--model", "clip-vit-z"]),
    ("score-bench-missing", ["score", "--model", "tiny-clip", "--benchmark", V + "/none.parquet", "--out", "{out}"], ["--benchmark", "none.parquet"]),
    ("score-bench-text", ["score", "--model", "tiny-clip", "--benchmark", V + "/text.parquet", "--out", "{out}"], ["--benchmark", "text.parquet"]),
    ("score-bench-concepts", ["score", "--model", "tiny-clip", "--benchmark", V + "/concepts.parquet", "--out", "{out}"], ["--benchmark", "missing column"]),
    ("score-bench-corrupt", ["score", "--model", "tiny-clip", "--benchmark", V + "/corrupt.parquet", "--images", V + "/images", "--out", "{out}"], ["corrupt.parquet"]),
    ("score-images-missing", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--images", V + "/nowhere", "--out", "{out}"], ["--images", "nowhere"]),
    ("score-images-file", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--images", V + "/notes.txt", "--out", "{out}"], ["--images", "notes.txt"]),
    ("score-images-none", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--out", "{out}"], ["--images"]),
    ("score-no-image-col", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench.parquet", "--out", "{out}"], ["--benchmark", "--blind"]),
    ("score-out-nodir-fails-later", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench.parquet", "--out", "{out}/x/y"], ["--benchmark", "--blind"]),
    ("score-blind-contrastive", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench.parquet", "--blind", "--out", "{out}"], ["--blind", "tiny-clip"]),
    ("score-device", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--device", "tpu", "--out", "{out}"], ["--device", "tpu"]),
    ("score-dup-ids", ["score", "--model", "tiny-clip", "--benchmark", V + "/dup_ids.parquet", "--images", V + "/images", "--out", "{out}"], ["--benchmark", "sample_id", "duplicate"]),
    ("score-out-file", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", V + "/a_file"], ["--out", "a_file"]),
    ("score-out-unwritable", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", "/sys/autocomp-s"], ["/sys/autocomp-s"]),
    ("score-no-model", ["score", "--benchmark", V + "/bench_images.parquet", "--out", "{out}"], ["--model"]),
    ("score-limit-zero", [*S, "--model", "tiny-clip", "--limit", "0", "--out", "{out}"], ["--limit", "0", "at least 1"]),
    ("score-limit-negative", [*S, "--model", "tiny-clip", "--limit", "-5", "--out", "{out}"], ["--limit", "-5"]),
    ("score-limit-text", [*S, "--model", "tiny-clip", "--limit", "many", "--out", "{out}"], ["--limit", "many"]),
    ("score-limit-lowered", [*S, "--model", "tiny-clip", "--limit", "2", "--out", V + "/scored"], ["--limit", "first 3 items", "--limit 3"]),
    ("score-out-other-weights", [*S, "--model", "hf:" + V + "/vlm", "--out", V + "/scored"], ["--out", "hf-vlm", "another model"]),
    ("score-batch-zero", [*S, "--model", "tiny-clip", "--batch-size", "0", "--out", "{out}"], ["--batch-size", "at least 1"]),
    ("score-batch-text", [*S, "--model", "tiny-clip", "--batch-size", "big", "--out", "{out}"], ["--batch-size", "big"]),
    ("score-models-dup", [*S, "--model", "tiny-clip,tiny-siglip", "--model", "tiny-clip", "--out", "{out}"], ["--model", "same folder"]),
    ("score-models-third-typo", [*S, "--model", "tiny-clip", "--model", "tiny-siglip,clip-vit-z", "--out", "{out}"], ["--model", "clip-vit-z"]),
    ("score-models-empty", [*S, "--model", ",", "--out", "{out}"], ["--model", "at least one"]),
    ("score-openclip-syntax", [*S, "--model", "open_clip:ViT-B-32", "--out", "{out}"], ["--model", "open_clip:ARCH:PRETRAINED"]),
    ("score-openclip-arch", [*S, "--model", "tiny-clip,open_clip:ViT-B-3:openai", "--out", "{out}"], ["ViT-B-3", "closest", "ViT-B-32"]),
    ("score-openclip-tag", [*S, "--model", "open_clip:ViT-B-32:laion2b_xx", "--out", "{out}"], ["laion2b_xx", "laion2b_s34b_b79k", "file:"]),
    ("score-openclip-file", [*S, "--model", "open_clip:ViT-B-32:file:" + V + "/none.pt", "--out", "{out}"], ["none.pt", "not found"]),
    ("score-openclip-noweights", [*S, "--model", "open_clip:local-dir:" + V + "/oc_noweights", "--out", "{out}"], ["oc_noweights", "holds no weights"]),
    ("score-openclip-noconfig", [*S, "--model", "open_clip:local-dir:" + V + "/empty_dir", "--out", "{out}"], ["empty_dir", "open_clip_config.json"]),
    ("score-hf-missing", [*S, "--model", "hf:" + V + "/nowhere", "--out", "{out}"], ["--model", "no such folder"]),
    ("score-hf-noconfig", [*S, "--model", "hf:" + V + "/empty_dir", "--out", "{out}"], ["empty_dir", "neither config.json"]),
    ("score-hf-clip", [*S, "--model", "hf:" + V + "/hf_clip", "--out", "{out}"], ["hf_clip", "CLIPModel", "open_clip:ARCH:PRETRAINED"]),
    ("score-hf-text-lm", [*S, "--model", "hf:" + V + "/hf_llm", "--out", "{out}"], ["hf_llm", "not a vision-language model"]),
    ("score-hf-bad-id", [*S, "--model", "hf:not-an-id", "--out", "{out}"], ["not-an-id", "ORG/NAME"]),
    ("score-blind-mixed", ["score", "--model", "tiny-qwen2.5-vl,tiny-clip", "--benchmark", V + "/bench.parquet", "--blind", "--out", "{out}"], ["--blind", "tiny-clip"]),
    ("score-bench-empty-folder", ["score", "--model", "tiny-clip", "--benchmark", V + "/empty_dir", "--out", "{out}"], ["--benchmark", "empty_dir", "without Parquet parts"]),
    ("score-bench-mixed", ["score", "--model", "tiny-clip", "--benchmark", V + "/mixed", "--images", V + "/images", "--out", "{out}"], ["--benchmark", "mixes schemas", "image"]),
    ("score-bench-name-no-store", ["score", "--model", "tiny-clip", "--benchmark", "run-1", "--out", "{out}"], ["--benchmark", "run-1", "--store"]),
    ("score-bench-name-unknown", ["score", "--model", "tiny-clip", "--benchmark", "run-9", "--store", V + "/store", "--out", "{out}"], ["--benchmark", "run-9", "published: run-1"]),
    ("score-bench-name-bad", ["score", "--model", "tiny-clip", "--benchmark", "../run-1", "--store", V + "/store", "--out", "{out}"], ["--benchmark", "not a benchmark name"]),
    ("score-store-scheme", ["score", "--model", "tiny-clip", "--benchmark", "run-1", "--store", "ftp://host/x", "--out", "{out}"], ["--store", "ftp://host/x"]),
    ("score-out-old-layout", [*S, "--model", "tiny-clip", "--out", V + "/oldrun"], ["--out", "oldrun", "earlier autocomp"]),
    ("score-remote-code", ["score", "--model", "clip-vit-z", "--benchmark", V + "/none.parquet", "--out", "{out}"], ["--model"]),
    ("score-blind-mode", ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", V + "/bench.parquet", "--blind", "maybe", "--out", "{out}"], ["--blind", "maybe", "likelihood", "choice"]),
    ("score-choice-contrastive", ["score", "--model", "tiny-clip", "--benchmark", V + "/bench.parquet", "--blind", "choice", "--out", "{out}"], ["--blind", "tiny-clip"]),
    ("score-choice-negatives-zero", ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", V + "/bench.parquet", "--blind", "choice", "--choice-negatives", "0", "--out", "{out}"], ["--choice-negatives", "0", "1 or more"]),
    ("score-choice-negatives-text", ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", V + "/bench.parquet", "--blind", "choice", "--choice-negatives", "many", "--out", "{out}"], ["--choice-negatives", "many"]),
    ("score-choice-seed-negative", ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", V + "/bench.parquet", "--blind", "choice", "--choice-seed", "-1", "--out", "{out}"], ["--choice-seed", "-1", "0 or more"]),
    ("score-choice-seed-text", ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", V + "/bench.parquet", "--blind", "choice", "--choice-seed", "x1", "--out", "{out}"], ["--choice-seed", "x1"]),
    ("score-choice-seed-likelihood", ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", V + "/bench.parquet", "--blind", "--choice-seed", "3", "--out", "{out}"], ["--choice-seed", "3", "--blind choice"]),
    ("score-choice-negatives-images", ["score", "--model", "tiny-qwen2.5-vl", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--choice-negatives", "9", "--out", "{out}"], ["--choice-negatives", "9", "--blind choice"]),
    # ------------------------------------------------------------------ run (specs and models are checked before any task)
    ("run-specs-form", ["run", "--out", "{out}", "--specs", "color-2"], ["--specs", "color-2", "family:N"]),
    ("run-specs-family", ["run", "--out", "{out}", "--specs", "colour:2"], ["--specs", "colour"]),
    ("run-specs-n", ["run", "--out", "{out}", "--specs", "color:7"], ["--specs", "color:7"]),
    ("run-specs-empty", ["run", "--out", "{out}", "--specs", ","], ["--specs"]),
    ("run-count", ["run", "--out", "{out}", "--count", "0"], ["--count", "0"]),
    ("run-count-huge", ["run", "--out", "{out}", "--specs", "color:1", "--count", "100000"], ["--count", "100000"]),
    ("run-shards", ["run", "--out", "{out}", "--num-shards", "0"], ["--num-shards", "0"]),
    ("run-model", ["run", "--out", "{out}", "--model", "clip-vit-z"], ["--model", "clip-vit-z"]),
    ("run-profile", ["run", "--out", "{out}", "--profile", "huge"], ["--profile", "huge"]),
    ("run-out-file", ["run", "--out", V + "/a_file"], ["--out", "a_file"]),
    ("run-seed", ["run", "--out", "{out}", "--seed", "-3"], ["--seed", "-3"]),
    ("run-name", ["run", "--out", "{out}", "--name", "a/b"], ["--name", "a/b"]),
    ("run-model-offline", ["run", "--out", "{out}", "--model", "clip-vit-b-16"], ["--model", "clip-vit-b-16", "tiny"]),
    ("run-out-results", ["run", "--out", V + "/good_run"], ["--out", "good_run", "results/"]),
    # ------------------------------------------------------------------ compile / upload / schedule / submit
    ("compile-out-file", ["compile", "--out", V + "/a_file"], ["--out", "a_file"]),
    ("compile-out-under-file", ["compile", "--out", V + "/a_file/dist"], ["a_file"]),
    ("upload-no-host", ["upload", "--dist", V + "/dist"], ["--host"]),
    ("upload-no-dist", ["upload", "--host", "http://127.0.0.1:9", "--dist", V + "/empty_dir"], ["--dist", "empty_dir"]),
    ("upload-pipeline", ["upload", "--host", "http://127.0.0.1:9", "--pipeline", "train"], ["--pipeline", "train"]),
    ("schedule-cron", ["schedule", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "generate_benchmark", "--name", "w", "--cron", "0 3 * * 1"], ["--cron", "6 fields"]),
    ("schedule-no-host", ["schedule", "--dist", V + "/dist", "--param", "name=x", "--pipeline", "generate_benchmark", "--name", "w", "--cron", "0 0 3 * * 1", "--store-capacity", "10Ti"], ["--host"]),
    ("schedule-full-store", ["schedule", "--dist", V + "/dist", "--param", "name=x", "--pipeline", "generate_benchmark", "--name", "w", "--cron", "0 0 3 * * 1"], ["store", "cannot hold this run", "GB"]),
    ("resume-no-host", ["resume", "--dist", V + "/dist", "run-1"], ["--host"]),
    ("resume-no-id", ["resume", "--dist", V + "/dist", "--host", "http://127.0.0.1:9"], ["RUN_ID"]),
    ("schedule-concurrency", ["schedule", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "generate_benchmark", "--name", "w", "--cron", "0 0 3 * * 1", "--max-concurrency", "0"], ["--max-concurrency", "0"]),
    ("schedule-param", ["schedule", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "generate_benchmark", "--name", "w", "--cron", "0 0 3 * * 1", "--param", "count"], ["--param", "count"]),
    ("submit-no-host", ["submit", "--dist", V + "/dist", "--param", "name=x", "--pipeline", "evaluate_models", "--name", "x"], ["--host"]),
    ("submit-param", ["submit", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "evaluate_models", "--name", "x", "--param", "=3"], ["--param", "=3"]),
    ("submit-pipeline", ["submit", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "nope", "--name", "x"], ["--pipeline", "nope"]),
    ("submit-host", ["submit", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "evaluate_models", "--name", "x", "--param", "name=x"], ["--host", "127.0.0.1:9"]),
    ("submit-no-name", ["submit", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "evaluate_models"], ["--name"]),
    # ------------------------------------------------------------------ report
    ("report-nothing", ["report", "--out", "{out}"], ["--run"]),
    ("leaderboard-no-store", ["leaderboard", "--out", "{out}"], ["--store"]),
    ("leaderboard-store-missing", ["leaderboard", "--store", V + "/nowhere", "--out", "{out}"], ["nowhere"]),
    ("leaderboard-out-file", ["leaderboard", "--store", V, "--out", V + "/a_file"], ["--out", "a_file"]),
    ("report-both", ["report", "--run", V + "/run", "--store", V, "--name", "x", "--out", "{out}"], ["--run"]),
    ("report-run-missing", ["report", "--run", V + "/nowhere", "--out", "{out}"], ["--run", "nowhere"]),
    ("report-run-empty", ["report", "--run", V + "/empty_dir", "--out", "{out}"], ["--run", "empty_dir"]),
    ("report-store-noname", ["report", "--store", V, "--out", "{out}"], ["--name"]),
    ("report-store-scheme", ["report", "--store", "ftp://x/y", "--name", "b", "--out", "{out}"], ["--store", "ftp://x/y"]),
    ("report-store-missing", ["report", "--store", V + "/nowhere", "--name", "b", "--out", "{out}"], ["b"]),
    ("report-runjson", ["report", "--run", V + "/run", "--out", "{out}"], ["run.json"]),
    ("report-human-latin1", ["report", "--run", V + "/human_latin1", "--out", "{out}"], ["a.csv", "UTF-8"]),
    ("report-human-short", ["report", "--run", V + "/human_short", "--out", "{out}"], ["a.csv", "row"]),
    ("report-human-cols", ["report", "--run", V + "/human_nocols", "--out", "{out}"], ["a.csv", "annotator"]),
    ("report-out-file", ["report", "--run", V + "/good_run", "--out", V + "/a_file"], ["a_file"]),
    ("report-compare", ["report", "--run", V + "/good_run", "--compare", V + "/nowhere", "--out", "{out}"], ["--compare", "nowhere"]),
    ("report-compare-same", ["report", "--run", V + "/good_run", "--compare", V + "/good_run", "--out", "{out}"], ["--compare", "good_run", "differ"]),
    ("report-store-compare-same", ["report", "--store", V, "--name", "b", "--compare", "b", "--out", "{out}"], ["--compare", "b", "differ"]),
    ("report-seed", ["report", "--run", V + "/run", "--seed", "x", "--out", "{out}"], ["--seed", "x"]),
    ("report-s3-creds", ["report", "--store", "s3://bucket/runs", "--name", "b", "--out", "{out}"], ["--store", "AUTOCOMP_S3_ENDPOINT"]),
    # ------------------------------------------------------------------ demo
    ("demo-count", ["demo", "--out", "{out}", "--count", "0"], ["--count", "0"]),
    ("demo-out-file", ["demo", "--out", V + "/a_file"], ["a_file"]),
    ("demo-seed", ["demo", "--out", "{out}", "--seed", "-2"], ["--seed", "-2"]),
    # ------------------------------------------------------------------ audit
    ("audit-export-missing", ["audit", "export", "--benchmark", V + "/nowhere", "--out", "{out}"], ["--benchmark", "nowhere"]),
    ("audit-export-concepts", ["audit", "export", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", "{out}", "--concepts", "0"], ["--concepts", "0"]),
    ("audit-export-annotators", ["audit", "export", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", "{out}", "--annotators", "0"], ["--annotators", "0"]),
    ("audit-export-options", ["audit", "export", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", "{out}", "--confusion-options", "1"], ["--confusion-options", "1"]),
    ("audit-export-text", ["audit", "export", "--benchmark", V + "/text.parquet", "--out", "{out}"], ["--benchmark", "text.parquet"]),
    ("audit-export-escape", ["audit", "export", "--benchmark", V + "/escape.parquet", "--images", V + "/images", "--out", "{out}", "--concepts", "1", "--annotators", "1", "--include-rejected"], ["passwd"]),
    ("audit-serve-missing", ["audit", "serve", V + "/nowhere"], ["nowhere"]),
    ("audit-serve-port", ["audit", "serve", V + "/empty_dir", "--port", "99999"], ["--port", "99999"]),
    ("audit-collect-missing", ["audit", "collect", V + "/nowhere", "--out", "{out}"], ["nowhere"]),
    ("audit-judge-one", ["audit", "judge", "--verdicts", V + "/empty_dir", "--out", "{out}"], ["--verdicts"]),
    ("audit-judge-missing", ["audit", "judge", "--verdicts", V + "/nowhere", "--verdicts", V + "/nowhere2", "--out", "{out}"], ["--verdicts", "nowhere"]),
    ("audit-none", ["audit"], ["AUDIT_VERB"]),
    ("submit-param-unknown", ["submit", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "evaluate_models", "--name", "x", "--param", "colour=red"], ["--param", "colour"]),
    ("submit-param-type", ["submit", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "generate_benchmark", "--name", "x", "--param", "count=many"], ["--param", "count"]),
    # ------------------------------------------------------------------ doctor
    ("doctor-no-host", ["doctor"], ["--host"]),
    ("prefetch-model", ["prefetch", "--list", "--model", "gpt-9"], ["--model", "gpt-9"]),
    ("plan-count", ["plan", "--count", "0"], ["--count", "0"]),
    ("plan-profile", ["plan", "--profile", "nope"], ["--profile", "nope"]),
    ("plan-model", ["plan", "--models", "gpt-9"], ["--models", "gpt-9"]),
    ("leaderboard-store-scheme", ["leaderboard", "--store", "ftp://x", "--out", "{out}"], ["--store", "ftp://x"]),
    # ------------------------------------------------------------------ finetune
    ("ft-model", ["finetune", "train", "--model", "gpt-9", "--benchmark", V + "/bench_images.parquet", "--negatives", "swap", "--out", "{out}"], ["--model", "gpt-9"]),
    ("ft-negatives", ["finetune", "train", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--negatives", "all", "--out", "{out}"], ["--negatives", "all"]),
    ("ft-bench-missing", ["finetune", "train", "--model", "tiny-clip", "--benchmark", V + "/none.parquet", "--negatives", "swap", "--out", "{out}", "--profile", "tiny"], ["none.parquet"]),
    ("ft-bench-text", ["finetune", "train", "--model", "tiny-clip", "--benchmark", V + "/text.parquet", "--negatives", "swap", "--out", "{out}", "--profile", "tiny"], ["text.parquet"]),
    ("ft-k", ["finetune", "train", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--negatives", "swap", "--out", "{out}", "--k", "-1", "--profile", "tiny"], ["-1"]),
    ("ft-steps", ["finetune", "train", "--model", "tiny-clip", "--benchmark", V + "/bench_images.parquet", "--negatives", "swap", "--out", "{out}", "--steps", "0", "--profile", "tiny"], ["0"]),
    ("ft-generative", ["finetune", "train", "--model", "tiny-qwen2.5-vl", "--benchmark", V + "/bench_images.parquet", "--negatives", "swap", "--out", "{out}", "--profile", "tiny"], ["tiny-qwen2.5-vl"]),
    ("ft-split-missing", ["finetune", "split", "--benchmark", V + "/none.parquet", "--out", "{out}"], ["none.parquet"]),
    ("ft-split-text", ["finetune", "split", "--benchmark", V + "/text.parquet", "--out", "{out}"], ["text.parquet"]),
    ("ft-score-missing", ["finetune", "score", "--model", V + "/nowhere", "--benchmark", V + "/bench_images.parquet", "--out", "{out}"], ["nowhere"]),
    ("ft-report-missing", ["finetune", "report", "--runs", V + "/nowhere", "--out", "{out}"], ["nowhere"]),
    ("ft-local-model", ["finetune", "local", "--out", "{out}", "--model", "gpt-9"], ["gpt-9"]),
    ("ft-local-profile", ["finetune", "local", "--out", "{out}", "--profile", "huge"], ["--profile", "huge"]),
    # ------------------------------------------------------------------ import
    ("import-format", ["import", "sugarcrepes", "--source", V + "/sugar_bad.json", "--out", "{out}"], ["FORMAT", "sugarcrepes", "sugarcrepe"]),
    ("import-no-source", ["import", "sugarcrepe", "--out", "{out}"], ["--source"]),
    ("import-source-missing", ["import", "autocomp-release", "--source", V + "/nowhere.parquet", "--out", "{out}"], ["--source", "nowhere.parquet"]),
    ("import-release-text", ["import", "autocomp-release", "--source", V + "/text.parquet", "--out", "{out}"], ["--source", "text.parquet", "readable"]),
    ("import-release-family", ["import", "autocomp-release", "--source", V + "/other.parquet", "--out", "{out}"], ["--source", "other.parquet", "colors"]),
    ("import-release-columns", ["import", "autocomp-release", "--source", V + "/release_cols.parquet", "--out", "{out}"], ["--source", "missing column", "handmade_caption"]),
    ("import-release-empty-dir", ["import", "autocomp-release", "--source", V + "/empty_dir", "--out", "{out}"], ["--source", "empty_dir"]),
    ("import-release-no-images", ["import", "autocomp-release", "--source", V + "/release_paths.parquet", "--out", "{out}"], ["--images", "h/1.png"]),
    ("import-release-images-file", ["import", "autocomp-release", "--source", V + "/release_paths.parquet", "--out", "{out}", "--images", V + "/a_file"], ["--images", "a_file"]),
    ("import-release-image-missing", ["import", "autocomp-release", "--source", V + "/release_paths.parquet", "--out", "{out}", "--images", V + "/images"], ["handmade_image", "--skip-missing"]),
    ("import-release-escape", ["import", "autocomp-release", "--source", V + "/release_escape.parquet", "--out", "{out}", "--images", V + "/images", "--skip-missing"], ["--images", "passwd", "refused"]),
    ("import-protocol", ["import", "autocomp-release", "--source", V + "/release_paths.parquet", "--out", "{out}", "--protocol", "lax"], ["--protocol", "lax"]),
    ("import-out-exists", ["import", "autocomp-release", "--source", V + "/release_paths.parquet", "--out", V + "/empty_dir"], ["--out", "empty_dir", "--force"]),
    ("import-out-file", ["import", "autocomp-release", "--source", V + "/release_paths.parquet", "--out", V + "/a_file", "--force"], ["--out", "a_file", "is a file"]),
    ("import-out-under-file", ["import", "sugarcrepe", "--source", V + "/sugar_bad.json", "--out", V + "/a_file/out"], ["--out", "a_file", "lies under"]),
    ("import-out-nodir-fails-later", ["import", "sugarcrepe", "--source", V + "/sugar_bad.json", "--out", "{out}/nowhere/out", "--images", V + "/images"], ["--source", "JSON"]),
    ("import-sugar-json", ["import", "sugarcrepe", "--source", V + "/sugar_bad.json", "--out", "{out}", "--images", V + "/images"], ["--source", "sugar_bad.json", "JSON"]),
    ("import-sugar-no-images", ["import", "sugarcrepe", "--source", V + "/sugar_missing.json", "--out", "{out}"], ["--images", "COCO"]),
    ("import-sugar-escape", ["import", "sugarcrepe", "--source", V + "/sugar_escape.json", "--out", "{out}", "--images", V + "/images"], ["--images", "passwd", "refused"]),
    ("import-sugar-image-missing", ["import", "sugarcrepe", "--source", V + "/sugar_missing.json", "--out", "{out}", "--images", V + "/images"], ["nope.jpg", "--skip-missing"]),
    ("import-sugar-source-missing", ["import", "sugarcrepe", "--source", V + "/nowhere", "--out", "{out}", "--images", V + "/images"], ["--source", "nowhere"]),
    # ------------------------------------------------------------------ export
    ("export-harness", ["export", "lm-eval", "--benchmark", V + "/bench_images.parquet", "--out", "{out}"], ["HARNESS", "lm-eval"]),
    ("export-bench-missing", ["export", "vlmevalkit", "--benchmark", V + "/none.parquet", "--out", "{out}"], ["--benchmark", "none.parquet"]),
    ("export-bench-text", ["export", "vlmevalkit", "--benchmark", V + "/text.parquet", "--out", "{out}"], ["--benchmark", "text.parquet"]),
    ("export-bench-concepts", ["export", "lmms-eval", "--benchmark", V + "/concepts.parquet", "--out", "{out}"], ["--benchmark", "missing column"]),
    ("export-no-images", ["export", "clip-benchmark", "--benchmark", V + "/bench_images.parquet", "--out", "{out}"], ["--images", "folder"]),
    ("export-sets", ["export", "lmms-eval", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--sets", "swap,all", "--out", "{out}"], ["--sets", "all"]),
    ("export-negatives", ["export", "vlmevalkit", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--negatives", "26", "--out", "{out}"], ["--negatives", "25"]),
    ("export-limit", ["export", "vlmevalkit", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--limit", "0", "--out", "{out}"], ["--limit", "at least 1"]),
    ("export-out-exists", ["export", "vlmevalkit", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", V], ["--out", "--force"]),
    ("import-vlmevalkit-no-key", ["import", "vlmevalkit-results", "--source", V + "/notes.txt", "--out", "{out}"], ["--key", "AutoComp_key"]),
    ("import-vlmevalkit-source", ["import", "vlmevalkit-results", "--source", V + "/notes.txt", "--key", V + "/bench.parquet", "--model", "m", "--out", "{out}"], ["--key", "bench.parquet"]),
    # ------------------------------------------------------------------ the verb itself
    ("no-verb", [], ["VERB"]),
    ("unknown-verb", ["scores"], ["scores"]),
]  # fmt: skip


@pytest.mark.parametrize("argv, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_clean_line(argv, words, d, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KFP_HOST", raising=False)
    for name in ("AUTOCOMP_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "out"
    args = [a.replace("{d}", str(d)).replace("{out}", str(out)) for a in argv]
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    try:
        code = main(args)
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    assert err.startswith("autocomp"), err
    for word in words:
        assert word.replace("{d}", str(d)) in err, (word, err)
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith("out")]
    assert leftovers == [], leftovers
    after = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    assert after == before  # inputs untouched, nothing written beside them


def test_the_corpus_is_large():
    assert len(CASES) >= 150
    verbs = {c[1][0] for c in CASES if c[1]}
    from autocomp.cli.main import build_parser

    parser = build_parser()
    known = set(parser._subparsers._group_actions[0].choices)  # noqa: SLF001
    assert known - verbs <= set(), sorted(known - verbs)  # every verb has cases


def test_help_of_every_verb_exits_0(capsys):
    from autocomp.cli.main import build_parser

    choices = build_parser()._subparsers._group_actions[0].choices  # noqa: SLF001
    for verb in choices:
        with pytest.raises(SystemExit) as exc:
            main([verb, "--help"])
        assert exc.value.code == 0
    assert "usage" in capsys.readouterr().out
