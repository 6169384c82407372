"""The hostile corpus, round 2 (issue 24): the verbs added since the first round (import,
score's options, finetune, audit, report --compare, doctor/submit/schedule, run), by class:

1. an output that is, contains or lies inside an input is refused (every verb with --out);
2. a name that becomes a path component (model, run, study annotator, benchmark, run name) is
   checked once (store/catalog/ids.check_component);
3. damaged state files are repaired by their documented rule or refused naming the file;
4. imports count what they drop (spot checks; tests/importers holds the rest);
5. stale or foreign results are refused or kept, never silently mixed;
6. values are checked before any work and before any folder appears;
7. several models, one broken: one line, the others stay, the summary says which failed;
8. temporaries a killed run left are swept on the re-run;
9. compile: every value that reaches the compiled YAML (GPU placement scheme and labels, GPU
   sizes, tolerations, pull secrets, the backend) is checked before anything is written;
10. a network peer that accepts and never answers (a KFP API, an S3 store): every verb that
   talks to it ends within the one network deadline (autocomp.network) with one line.

Each CASES row is (id, class, argv, words the one error line must contain); `{d}` is the
prepared inputs folder, `{out}` an output path that must not exist after the call, and every
file under `{d}` must be unchanged (nothing deleted, nothing written beside it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from autocomp.cli.main import main
from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage

TINY = "tiny-clip"


def _sugar(folder: Path) -> None:
    (folder / "imgs").mkdir(parents=True)
    items = {}
    for i in range(3):
        Image.new("RGB", (8, 8), (40 * i, 9, 9)).save(folder / "imgs" / f"{i}.jpg")
        items[str(i)] = {"filename": f"{i}.jpg", "caption": f"a red cup number {i}",
                         "negative_caption": f"a blue cup number {i}"}  # fmt: skip
    (folder / "swap_att.json").write_text(json.dumps(items))


@pytest.fixture(scope="module")
def d(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    sample_stage("color", 2, 4, 0, d / "concepts.parquet")
    negatives_stage(d / "concepts.parquet", d / "bench.parquet", NegativesConfig(workers=1))
    plain = pq.read_table(d / "bench.parquet")
    ids = plain.column("concept_id").to_pylist()
    bench = pa.concat_tables(
        plain.append_column("sample_id", pa.array([f"{i}/{cond}" for i in ids])).append_column(
            "condition", pa.array([cond] * len(ids))
        )
        for cond in ("minimal", "contextual")
    )
    (d / "images").mkdir()
    names = []
    for i in range(bench.num_rows):
        Image.new("RGB", (16, 16), (10 * i, 0, 0)).save(d / "images" / f"{i}.png")
        names.append(f"{i}.png")
    pq.write_table(bench.append_column("image", pa.array(names)), d / "images" / "bench.parquet")
    pq.write_table(bench.append_column("image", pa.array(names)), d / "bench_images.parquet")
    _sugar(d / "sugar")
    (d / "a_file").write_text("x")
    (d / "empty_dir").mkdir()
    (d / "deep.json").write_text("[" * 100_000 + "]" * 100_000)  # class 4: deep JSON
    (d / "deep_dict.json").write_text('{"a": ' * 50_000 + "1" + "}" * 50_000)
    # a registry of hostile names (class 2)
    tiny = {"title": "t", "backend": "open_clip", "score": "cosine",
            "architecture": "autocomp-tiny-clip", "weights": "tiny",
            "preprocess": {"resolution": 32, "mean": [0.5] * 3, "std": [0.5] * 3,
                           "interpolation": "bicubic", "resize_mode": "shortest",
                           "quick_gelu": False},
            "dtype": "float32", "gpus": 0, "gpu_memory_gb": 0, "trust_remote_code": False}  # fmt: skip
    for label, name in HOSTILE_NAMES.items():
        (d / f"registry_{label}.json").write_text(json.dumps({"models": [{**tiny, "name": name}]}))
    # a broken open_clip folder (class 7)
    (d / "broken").mkdir()
    (d / "broken" / "open_clip_config.json").write_text(
        json.dumps({"model_cfg": {"embed_dim": 8}, "preprocess_cfg": {}})
    )
    (d / "broken" / "open_clip_model.safetensors").write_bytes(b"\x00garbage" * 40)
    (d / "broken" / "open_clip_pytorch_model.bin").write_bytes(b"not a pickle" * 40)
    _runs(d, bench.append_column("image", pa.array(names)))
    _studies(d)
    _dist(d)
    # a store whose published benchmark's manifest is garbage (class 3: damaged state)
    (d / "store_garbage" / "benchmarks" / "x").mkdir(parents=True)
    (d / "store_garbage" / "benchmarks" / "x" / "_manifest.json").write_bytes(b"\x00{not json")
    return d


def _dist(d: Path) -> None:
    """Compiled pipelines (submit/schedule read them), images pinned as `make push` does."""
    import subprocess
    import sys

    lock = d / "lock.json"
    lock.write_text(json.dumps({k: {"image": f"r.test/autocomp-{k}:1", "digest": "sha256:" + "a" * 64}
                                for k in ("core", "gpu", "caption")}))  # fmt: skip
    subprocess.run([sys.executable, "-m", "autocomp.cli.main", "compile", "--out", str(d / "dist")],
                   check=True, capture_output=True,
                   env={**os.environ, "AUTOCOMP_IMAGE_LOCK": str(lock)})  # fmt: skip


def _runs(d: Path, bench: pa.Table) -> None:
    """A scored run folder (report's --run), a second one, and damaged run.json files."""
    from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA

    for name in ("run", "run2"):
        (d / name / "results" / "m" / "predictions").mkdir(parents=True)
        pq.write_table(bench, d / name / "benchmark.parquet")
        empty = PREDICTIONS_SCHEMA.empty_table()
        pq.write_table(empty, d / name / "results" / "m" / "predictions" / "part-00000.parquet")
        (d / name / "results" / "m" / "run.json").write_text("{}")
    garbage = d / "run_garbage" / "results" / "m" / "predictions"
    shutil.copytree(d / "run", d / "run_garbage")  # a run with a part that is not Parquet
    (garbage / "part-00001.parquet").write_bytes(b"PAR1" + bytes(range(256)) * 3)
    for k, body in DAMAGED_RUN_JSON.items():
        (d / f"state_{k}" / TINY).mkdir(parents=True)
        (d / f"state_{k}" / TINY / "run.json").write_text(body)
        (d / f"state_{k}" / "results" / "m" / "predictions").mkdir(parents=True)
        pq.write_table(bench, d / f"state_{k}" / "benchmark.parquet")
        pq.write_table(PREDICTIONS_SCHEMA.empty_table(),
                       d / f"state_{k}" / "results" / "m" / "predictions" / "part-00000.parquet")  # fmt: skip
        (d / f"state_{k}" / "results" / "m" / "run.json").write_text(body)


DAMAGED_RUN_JSON = {"list": "[1, 2]", "null": "null", "number": "7", "limit": '{"limit": "3"}'}


def _studies(d: Path) -> None:
    main(["audit", "export", "--benchmark", str(d / "bench_images.parquet"), "--images",
          str(d / "images"), "--out", str(d / "study"), "--concepts", "1", "--annotators", "1",
          "--include-rejected"])  # fmt: skip
    shutil.copytree(d / "study", d / "study_list")
    (d / "study_list" / "study.json").write_text("[1, 2]")
    shutil.copytree(d / "study", d / "study_escape")
    manifest = json.loads((d / "study" / "study.json").read_text())
    (first,) = manifest["annotators"]
    manifest["annotators"] = {"../../escape": manifest["annotators"][first]}
    (d / "study_escape" / "study.json").write_text(json.dumps(manifest))


HOSTILE_NAMES = {
    "dotdot": "..",
    "dotdot-x": "../x",
    "absolute": "/tmp/autocomp-hostile-abs",
    "empty": "",
    "nul": "a\0b",
    "long": "m" * 300,
    "dot": ".",
    "hidden": ".x",
    "backslash": "a\\b",
}

V = "{d}"
S = ["score", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images"]
SUG = [
    "import",
    "sugarcrepe",
    "--source",
    V + "/sugar/swap_att.json",
    "--images",
    V + "/sugar/imgs",
]
FT = ["finetune", "train", "--model", TINY, "--benchmark", V + "/bench_images.parquet", "--images",
      V + "/images", "--negatives", "swap", "--profile", "tiny"]  # fmt: skip
SUBMIT = ["submit", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline",
          "generate_benchmark", "--param", "name=b", "--name", "x"]  # fmt: skip
CASES: list[tuple[str, int, list[str], list[str]]] = [
    # ---------------------------------------------------------------- 1: output overlaps input
    ("import-out-is-images", 1, [*SUG, "--out", V + "/sugar/imgs", "--force"], ["--out", "images"]),
    ("import-out-contains-source", 1, [*SUG, "--out", V + "/sugar", "--force"], ["--out", "source"]),
    ("import-out-contains-all", 1, [*SUG, "--out", V, "--force"], ["--out"]),
    ("import-out-inside-images", 1, [*SUG, "--out", V + "/sugar/imgs/new", "--force"], ["--out", "images"]),
    ("import-out-is-source", 1, [*SUG, "--out", V + "/sugar/swap_att.json", "--force"], ["--out"]),
    ("import-release-out-images", 1, ["import", "autocomp-release", "--source", V + "/bench.parquet", "--images", V + "/images", "--out", V + "/images", "--force"], ["--out", "images"]),
    ("neg-out-is-input-force", 1, ["negatives", "--input", V + "/concepts.parquet", "--out", V + "/concepts.parquet", "--force"], ["--out", "--input"]),
    ("score-out-is-images", 1, [*S, "--model", TINY, "--out", V + "/images"], ["--out", "images"]),
    ("score-out-contains-bench", 1, [*S, "--model", TINY, "--out", V], ["--out", "benchmark"]),
    ("score-out-inside-images", 1, [*S, "--model", TINY, "--out", V + "/images/scores"], ["--out", "images"]),
    ("ft-out-is-images", 1, [*FT, "--out", V + "/images"], ["--out", "images"]),
    # weights that cannot load (offline, not cached): one line, and the split it made first goes
    ("ft-weights-offline", 6, [*FT[:3], "clip-vit-b-16", *FT[4:], "--out", "{out}"], ["--model", "clip-vit-b-16", "weights could not be loaded"]),
    ("ft-out-contains-bench", 1, [*FT, "--out", V], ["--out", "benchmark"]),
    ("ft-split-out-is-bench", 1, ["finetune", "split", "--benchmark", V + "/bench_images.parquet", "--out", V + "/bench_images.parquet"], ["--out"]),
    ("audit-export-out-inside-images", 1, ["audit", "export", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", V + "/images/study", "--concepts", "1", "--annotators", "1"], ["--out", "images"]),
    ("report-out-is-run", 1, ["report", "--run", V + "/run", "--out", V + "/run"], ["--out", "run"]),
    ("report-out-inside-run", 1, ["report", "--run", V + "/run", "--out", V + "/run/results/rep"], ["--out", "run"]),
    ("report-out-is-compare", 1, ["report", "--run", V + "/run", "--compare", V + "/run2", "--out", V + "/run2"], ["--out", "compare"]),
    ("collect-out-inside-study", 1, ["audit", "collect", V + "/study", "--out", V + "/study/human"], ["--out"]),
    # ---------------------------------------------------------------- 4: imports (spot checks)
    ("import-deep-json", 4, ["import", "sugarcrepe", "--source", V + "/deep.json", "--images", V + "/sugar/imgs", "--out", "{out}"], ["--source", "deep.json"]),
    ("import-deep-dict", 4, ["import", "sugarcrepe", "--source", V + "/deep_dict.json", "--images", V + "/sugar/imgs", "--out", "{out}"], ["--source", "deep_dict.json"]),
    # ---------------------------------------------------------------- 2: names as paths
    *[(f"score-registry-{k}", 2, ["@registry_" + k, *S, "--model", n or "''", "--out", "{out}"], ["name" if n else "--model"]) for k, n in HOSTILE_NAMES.items()],
    *[(f"run-name-{k}", 2, ["run", "--out", "{out}", "--name", n], ["--name"]) for k, n in HOSTILE_NAMES.items()],
    *[(f"report-store-name-{k}", 2, ["report", "--store", V + "/empty_dir", "--name", n, "--out", "{out}"], ["--name"]) for k, n in HOSTILE_NAMES.items() if n],
    *[(f"score-store-bench-{k}", 2, ["score", "--model", TINY, "--store", V + "/empty_dir", "--benchmark", n, "--out", "{out}"], ["--benchmark"]) for k, n in HOSTILE_NAMES.items() if n],
    *[(f"submit-name-{k}", 2, [*SUBMIT[:-1], n], ["--name"]) for k, n in HOSTILE_NAMES.items()],
    *[(f"submit-benchmark-name-{k}", 2, [*SUBMIT[:-4], "--param", "name=" + n, "--name", "x"], ["name"]) for k, n in HOSTILE_NAMES.items() if "\0" not in n],
    # ---------------------------------------------------------------- 6: values checked first
    ("ft-seed-neg", 6, [*FT, "--seed", "-1", "--out", "{out}"], ["--seed", "-1"]),
    ("ft-seed-huge", 6, [*FT, "--seed", str(2**70), "--out", "{out}"], ["--seed"]),
    ("ft-split-seed-neg", 6, [*FT, "--split-seed", "-4", "--out", "{out}"], ["--split-seed", "-4"]),
    ("ft-device", 6, [*FT, "--device", "quantum", "--out", "{out}"], ["--device", "quantum"]),
    ("ft-device-cuda-index", 6, [*FT, "--device", "cuda:x", "--out", "{out}"], ["--device", "cuda:x"]),
    ("ft-split-missing", 6, [*FT, "--split", V + "/nowhere.parquet", "--out", "{out}"], ["--split", "nowhere"]),
    ("ft-split-garbage", 6, [*FT, "--split", V + "/a_file", "--out", "{out}"], ["--split", "a_file"]),
    ("ft-split-wrong-table", 6, [*FT, "--split", V + "/concepts.parquet", "--out", "{out}"], ["--split", "concepts.parquet"]),
    ("ft-k-huge", 6, [*FT, "--k", "100000", "--out", "{out}"], ["--k"]),
    ("ft-steps-neg", 6, [*FT, "--steps", "-3", "--out", "{out}"], ["--steps", "-3"]),
    ("ft-split-verb-seed", 6, ["finetune", "split", "--benchmark", V + "/bench_images.parquet", "--out", "{out}", "--seed", "-1"], ["--seed", "-1"]),
    ("run-specs-dup", 6, ["run", "--out", "{out}", "--specs", "color:2,color:2"], ["--specs", "color:2"]),
    ("run-specs-dup-spaced", 6, ["run", "--out", "{out}", "--specs", "color:2, color:2"], ["--specs", "color:2"]),
    ("doctor-model-unknown", 6, ["doctor", "--host", "http://127.0.0.1:9", "--model", "gpt-9"], ["--model", "gpt-9"]),
    ("doctor-model-hostile", 6, ["doctor", "--host", "http://127.0.0.1:9", "--model", "../x"], ["--model", "../x"]),
    ("submit-count-zero", 6, [*SUBMIT, "--param", "count=0"], ["count"]),
    ("submit-seed-neg", 6, [*SUBMIT, "--param", "seed=-1"], ["seed"]),
    ("submit-specs-unknown", 6, [*SUBMIT, "--param", "specs=colour:2"], ["specs", "colour"]),
    ("schedule-count-zero", 6, ["schedule", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "generate_benchmark", "--name", "w", "--cron", "0 0 3 * * 1", "--param", "name=b", "--param", "count=0"], ["count"]),
    ("schedule-name-hostile", 6, ["schedule", "--dist", V + "/dist", "--host", "http://127.0.0.1:9", "--pipeline", "generate_benchmark", "--name", "../w", "--cron", "0 0 3 * * 1", "--param", "name=b"], ["--name"]),
    ("audit-export-seed-neg", 6, ["audit", "export", "--benchmark", V + "/bench_images.parquet", "--images", V + "/images", "--out", "{out}", "--seed", "-1", "--concepts", "1", "--include-rejected"], ["--seed", "-1"]),
    ("report-garbage-part", 3, ["report", "--run", V + "/run_garbage", "--out", "{out}"], ["--run", "part-00001.parquet", "not a readable Parquet", "delete it"]),
    ("report-seed-neg", 6, ["report", "--run", V + "/run", "--seed", "-1", "--out", "{out}"], ["--seed", "-1"]),
    # ---------------------------------------------------------------- 3: damaged state
    *[(f"score-runjson-{k}", 3, [*S, "--model", TINY, "--out", V + f"/state_{k}"], ["run.json"]) for k in ("list", "null", "number", "limit")],
    *[(f"report-runjson-{k}", 3, ["report", "--run", V + f"/state_{k}", "--out", "{out}"], ["run.json"]) for k in ("list", "null", "number")],
    ("collect-study-list", 3, ["audit", "collect", V + "/study_list", "--out", "{out}"], ["study_list"]),
    ("serve-study-list", 3, ["audit", "serve", V + "/study_list", "--port", "1"], ["study_list"]),
    ("collect-study-annotator-escape", 2, ["audit", "collect", V + "/study_escape", "--out", "{out}"], ["study_escape"]),
    ("report-store-garbage-manifest", 3, ["report", "--store", "file://" + V + "/store_garbage", "--name", "x", "--out", "{out}"], ["manifest", "benchmarks/x", "not JSON"]),
    ("score-store-garbage-manifest", 3, ["score", "--model", TINY, "--store", "file://" + V + "/store_garbage", "--benchmark", "x", "--out", "{out}"], ["manifest", "not JSON"]),
    # ---------------------------------------------------------------- 9: compile's YAML values
    ("compile-placement-unknown", 9, ["compile", "--out", "{out}", "--placement", "k8s"], ["--placement", "k8s"]),
    ("compile-labels-without-label", 9, ["compile", "--out", "{out}", "--placement", "labels"], ["--placement", "--gpu-label"]),
    ("compile-label-without-labels", 9, ["compile", "--out", "{out}", "--placement", "karpenter", "--gpu-label", "80:pool=h100"], ["--placement", "karpenter"]),
    ("compile-label-gb-superscript", 9, ["compile", "--out", "{out}", "--placement", "labels", "--gpu-label", "\u00b9\u2076:pool=t4"], ["--gpu-label"]),
    ("compile-label-gb-arabic", 9, ["compile", "--out", "{out}", "--placement", "labels", "--gpu-label", "\u0664\u0668:pool=x"], ["--gpu-label"]),
    ("compile-label-gb-off-tier", 9, ["compile", "--out", "{out}", "--placement", "labels", "--gpu-label", "32:pool=v100"], ["--gpu-label", "32"]),
    ("compile-label-key-slashes", 9, ["compile", "--out", "{out}", "--placement", "labels", "--gpu-label", "48:a/b/c=x"], ["--gpu-label", "a/b/c"]),
    ("compile-label-key-newline", 9, ["compile", "--out", "{out}", "--placement", "labels", "--gpu-label", "48:po\nol=x"], ["--gpu-label"]),
    ("compile-label-value-long", 9, ["compile", "--out", "{out}", "--placement", "labels", "--gpu-label", "48:pool=" + "v" * 64], ["--gpu-label"]),
    ("compile-label-value-placeholder", 9, ["compile", "--out", "{out}", "--placement", "labels", "--gpu-label", "48:pool={{workflow.uid}}"], ["--gpu-label"]),
    ("compile-toleration-effect", 9, ["compile", "--out", "{out}", "--toleration", "gpu=yes:Never"], ["--toleration"]),
    ("compile-toleration-key-tab", 9, ["compile", "--out", "{out}", "--toleration", "gp\tu:NoSchedule"], ["--toleration"]),
    ("compile-toleration-empty", 9, ["compile", "--out", "{out}", "--toleration", ""], ["--toleration"]),
    ("compile-pull-secret-upper", 9, ["compile", "--out", "{out}", "--image-pull-secret", "RegCred"], ["RegCred"]),
    ("compile-pull-secret-dots", 9, ["compile", "--out", "{out}", "--image-pull-secret", "../cred"], ["../cred"]),
    ("compile-pull-secret-empty", 9, ["compile", "--out", "{out}", "--image-pull-secret", ""], ["pull"]),
    ("compile-backend-list", 9, ["compile", "--out", "{out}", "--backend", "2.14.0 2.15.0"], ["--backend"]),
    ("compile-backend-old", 9, ["compile", "--out", "{out}", "--backend", "1.8.5"], ["--backend", "1.8.5"]),
    ("compile-gpu-size-off-tier", 9, ["compile", "--out", "{out}", "--gpu-size", "validate=32"], ["--gpu-size"]),
    ("compile-gpu-size-small", 9, ["compile", "--out", "{out}", "--gpu-size", "caption=16"], ["--gpu-size", "caption=16"]),
    ("compile-gpu-size-cpu-step", 9, ["compile", "--out", "{out}", "--gpu-size", "publish=48"], ["--gpu-size", "publish"]),
    ("compile-gpu-size-fullwidth", 9, ["compile", "--out", "{out}", "--gpu-size", "render=\uff14\uff18"], ["--gpu-size"]),
]  # fmt: skip


@pytest.mark.parametrize("argv, words", [c[2:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_input_is_one_clean_line(argv, words, d, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KFP_HOST", raising=False)
    if argv[0].startswith("@"):
        monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", str(d / (argv[0][1:] + ".json")))
        argv = argv[1:]
    shutil.rmtree("/tmp/autocomp-hostile-abs", ignore_errors=True)
    out = tmp_path / "out"
    args = [a.replace("{d}", str(d)).replace("{out}", str(out)) for a in argv]
    args = ["" if a == "''" else a for a in args]
    before = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    try:
        code = main(args)
    except SystemExit as exc:  # argparse
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)
    assert not out.exists()
    assert not Path("/tmp/autocomp-hostile-abs").exists()
    after = {p: p.stat().st_mtime_ns for p in d.rglob("*")}
    assert after == before  # inputs untouched, nothing written beside them


def _one_line(capsys, code: int, *words: str) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, (word, err)
    return err


def _call(argv: list[str]) -> int:
    try:
        return main([str(a) for a in argv])
    except SystemExit as exc:
        return exc.code


# -------------------------------------------------------------------- 3: damaged state files
@pytest.mark.slow  # scores or fine-tunes the tiny CLIP
def test_finetune_state_that_does_not_unpickle_is_refused_naming_it(d, tmp_path, capsys):
    out = tmp_path / "ft"
    (out / "state").mkdir(parents=True)
    (out / "state" / "train_state.pt").write_bytes(b"not a pickle at all")
    code = _call([*(a.replace("{d}", str(d)) for a in FT), "--out", out])
    _one_line(capsys, code, "train_state.pt")
    assert (out / "state" / "train_state.pt").read_bytes() == b"not a pickle at all"


def _study_copy(d: Path, tmp_path: Path) -> Path:
    study = tmp_path / "study"
    shutil.copytree(d / "study", study)
    return study


def test_a_journal_cut_inside_a_utf8_character_is_a_cut_line(d, tmp_path, capsys):
    from starlette.testclient import TestClient

    from autocomp.audit.app import create_app
    from autocomp.audit.study import Study

    study = _study_copy(d, tmp_path)
    (name,) = Study(study).annotators
    line = json.dumps({"item": 0, "answer": 0, "option": "caf\u00e9"}, ensure_ascii=False)
    cut = (line + "\n").encode() + '{"item": 1, "option": "caf\u00e9'.encode()[:-1]
    Study(study).journal(name).write_bytes(cut)
    assert Study(study).answers(name) == {0: 0}  # the cut line is ignored, the rest kept
    token = Study(study).annotators[name]["token"]
    client = TestClient(create_app(study))
    assert client.get(f"/a/{token}/item/1").status_code == 200
    assert _call(["audit", "collect", study, "--out", tmp_path / "human", "--partial"]) == 0
    assert (tmp_path / "human" / f"{name}.csv").is_file()


# -------------------------------------------------------------------- 6: HTTP answers, port
@pytest.mark.parametrize("answer", ["1.5", "abc", "\u00b2", "\u0661", "-1", "99999999", "", "1e3"])
def test_a_non_integer_answer_is_a_4xx_never_a_500(answer, d, tmp_path):
    from starlette.testclient import TestClient

    from autocomp.audit.app import create_app
    from autocomp.audit.study import Study

    study = _study_copy(d, tmp_path)
    (record,) = Study(study).annotators.values()
    client = TestClient(create_app(study), raise_server_exceptions=False)
    response = client.post(f"/a/{record['token']}/item/0", data={"answer": answer},
                           follow_redirects=False)  # fmt: skip
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    assert "\n" not in response.text.strip()


def test_serve_on_a_port_in_use_is_one_line(d, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = _call(["audit", "serve", d / "study", "--port", port])
    _one_line(capsys, code, "--port", str(port))
    assert capsys.readouterr().out == ""  # no links printed for a server that cannot start


# -------------------------------------------------------------------- 7: one broken model
@pytest.mark.slow  # scores or fine-tunes the tiny CLIP
def test_several_models_one_broken_keeps_the_others_and_says_which(d, tmp_path, capsys):
    out = tmp_path / "scores"
    argv = [a.replace("{d}", str(d)) for a in S]
    code = _call([*argv, "--model", TINY, "--model", f"open_clip:local-dir:{d}/broken",
                  "--out", out])  # fmt: skip
    _one_line(capsys, code, "broken")
    assert list((out / TINY / "predictions").glob("part-*"))  # the model scored first stays
    summary = pq.read_table(out / "summary.parquet")
    assert set(summary.column("model").to_pylist()) == {TINY}
    failed = json.loads((out / "failed.json").read_text())
    assert list(failed) == ["open_clip-broken"]


# -------------------------------------------------------------------- 5: stale, foreign results
def test_collect_into_a_human_folder_of_another_study_is_refused(d, tmp_path, capsys):
    human = tmp_path / "human"
    human.mkdir()
    (human / "W9.csv").write_text("annotator,sample_id,task,answer\nW9,x,valid,yes\n")
    code = _call(["audit", "collect", d / "study", "--out", human, "--partial"])
    _one_line(capsys, code, "W9")
    assert sorted(p.name for p in human.iterdir()) == ["W9.csv"]


@pytest.mark.slow  # scores or fine-tunes the tiny CLIP
def test_a_second_score_call_keeps_the_earlier_models_in_the_summary(d, tmp_path):
    out = tmp_path / "scores"
    argv = [a.replace("{d}", str(d)) for a in S]
    assert _call([*argv, "--model", TINY, "--out", out]) == 0
    assert _call([*argv, "--model", "tiny-siglip", "--out", out]) == 0
    summary = pq.read_table(out / "summary.parquet")
    assert set(summary.column("model").to_pylist()) == {TINY, "tiny-siglip"}


def test_compare_with_disjoint_concepts_is_a_profile_not_table_9(d, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(d / "run", other)
    table = pq.read_table(other / "benchmark.parquet")
    ids = [f"x{c}" for c in table.column("concept_id").to_pylist()]
    sample = [f"x{s}" for s in table.column("sample_id").to_pylist()]
    table = table.set_column(
        table.schema.get_field_index("concept_id"), "concept_id", pa.array(ids)
    )
    table = table.set_column(
        table.schema.get_field_index("sample_id"), "sample_id", pa.array(sample)
    )
    pq.write_table(table, other / "benchmark.parquet")
    # no concept in common: not Table 9 (its table would be empty) but the benchmark profile,
    # one model across benchmarks (issue 36 item 4); the cross-generator table is left out
    code = _call(["report", "--run", d / "run", "--compare", other, "--out", tmp_path / "rep"])
    assert code == 0, capsys.readouterr().err
    written = {p.stem for p in (tmp_path / "rep" / "tables").glob("*.parquet")}
    assert "benchmark_profile" in written and "cross_generator" not in written, written


# -------------------------------------------------------------------- 8: temporaries swept
def test_a_killed_collect_leaves_no_temporary_after_the_rerun(d, tmp_path):
    human = tmp_path / "human"
    (human / "questions").mkdir(parents=True)
    dead = 2**22 + 12345  # above pid_max's default: no such process
    stale = [human / f".V1.csv.tmp-{dead}", human / "questions" / f".V1.csv.tmp-{dead}-0a1b2c3d"]
    for path in stale:
        path.write_text("half")
    assert _call(["audit", "collect", d / "study", "--out", human, "--partial"]) == 0
    assert not any(p.exists() for p in stale)
    assert not [p for p in human.rglob(".*tmp*")]


@pytest.mark.slow  # scores or fine-tunes the tiny CLIP
def test_a_killed_score_leaves_no_temporary_after_the_rerun(d, tmp_path):
    out = tmp_path / "scores"
    (out / TINY).mkdir(parents=True)
    dead = 2**22 + 12345
    stale = [out / f".summary.parquet.tmp-{dead}-0a1b2c3d", out / TINY / f".run.json.tmp-{dead}"]
    for path in stale:
        path.write_text("half")
    argv = [a.replace("{d}", str(d)) for a in S]
    assert _call([*argv, "--model", TINY, "--out", out]) == 0
    assert not any(p.exists() for p in stale)


# -------------------------------------------------------------------- 4: imports count drops
def test_an_import_counts_what_it_drops(d, tmp_path):
    src = tmp_path / "sugar"
    _sugar(src)
    (src / "imgs" / "bad.jpg").write_bytes((src / "imgs" / "0.jpg").read_bytes()[:40])
    items = json.loads((src / "swap_att.json").read_text())
    text = json.dumps(items)[:-1]
    text += (
        ', "9": {"filename": "bad.jpg", "caption": "a red cup", "negative_caption": "a blue cup"}'
    )
    text += ', "8": {"filename": "1.jpg", "caption": " ", "negative_caption": "a cup"}'
    text += ', "0": {"filename": "2.jpg", "caption": "again", "negative_caption": "a cup"}}'
    (src / "swap_att.json").write_text(text)
    out = tmp_path / "out"
    assert _call(["import", "sugarcrepe", "--source", src / "swap_att.json", "--images",
                  src / "imgs", "--out", out, "--skip-missing"]) == 0  # fmt: skip
    report = json.loads((out / "import_report.json").read_text())
    dropped = json.dumps(report)
    assert "duplicate id" in dropped and "empty caption" in dropped and "decode" in dropped


# ==================================================================== round 3 (issue 34)
# 9. a number typed inside a value is ASCII digits only (errors.whole_number): superscripts,
#    other scripts' digits and full-width digits are refused, never int()'s traceback or a
#    silently different number;
# 10. a number in an imported file beyond what its column holds (int64) is refused or dropped;
# 11. a Parquet table damaged in the middle (its footer intact) is refused naming it when its
#     damaged page is read, and nothing is written;
# 12. a library's message that holds a line break is printed on one line.
ODD_DIGITS = {"superscript": "\u00b3", "arabic-indic": "\u0663", "fullwidth": "\uff13"}
ROUND3: list[tuple[str, int, list[str], list[str]]] = [
    *[(f"compile-gpu-size-{k}", 9, ["compile", "--out", "{out}", "--gpu-size", f"score={c}"], ["--gpu-size", "step=GB"]) for k, c in ODD_DIGITS.items()],
    *[(f"run-specs-{k}", 9, ["run", "--out", "{out}", "--specs", f"shape:{c}"], ["--specs", "family:N"]) for k, c in ODD_DIGITS.items()],
    ("run-specs-mixed-digits", 9, ["run", "--out", "{out}", "--specs", "color:2,position:1\u00b2"], ["--specs", "position"]),
    ("submit-specs-odd-digit", 9, [*SUBMIT, "--param", "specs=color:\u0662"], ["specs"]),
]  # fmt: skip


@pytest.mark.parametrize("argv, words", [c[2:] for c in ROUND3], ids=[c[0] for c in ROUND3])
def test_round3_hostile_input_is_one_clean_line(argv, words, d, tmp_path, capsys, monkeypatch):
    test_hostile_input_is_one_clean_line(argv, words, d, tmp_path, capsys, monkeypatch)


def _release_json(path: Path, **item: object) -> Path:
    base = {"id": 3, "task_type": "color", "num_objects": 2, "objects": ["cube", "sphere"],
            "attributes": ["red", "blue"], "handmade_caption": "a red cube and a blue sphere",
            "llm_caption": "a red cube beside a blue sphere"}  # fmt: skip
    path.write_text(json.dumps([{**base, **item}]))
    return path


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("id", 2**63, ["item 0", "2^63-1"]),
        ("id", 7 * 10**40, ["item 0", "whole number"]),
        ("num_objects", 2**64 + 1, ["no sample could be imported"]),
    ],
)
def test_a_number_beyond_int64_in_a_release_is_one_line(field, value, words, tmp_path, capsys):
    source = _release_json(tmp_path / "captions.json", **{field: value})
    (tmp_path / "generated").mkdir()
    out = tmp_path / "out"
    code = _call(["import", "autocomp-release", "--source", source, "--images",
                  tmp_path / "generated", "--out", out])  # fmt: skip
    _one_line(capsys, code, "--source", *words)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["captions.json", "generated"]


def _damaged_in_the_middle(d: Path, path: Path, fill: int, column: str) -> Path:
    """The concepts table written in many row groups, then a run of bytes in the middle (a data
    page, or a page header: thrift) overwritten; the footer, read at open, stays intact."""
    table = pq.read_table(d / "concepts.parquet")
    pq.write_table(pa.concat_tables([table] * 60), path, row_group_size=16)
    meta = pq.ParquetFile(path).metadata
    index = meta.schema.to_arrow_schema().get_field_index(column)
    chunk = meta.row_group(meta.num_row_groups // 2).column(index)  # in a middle row group
    start = chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start : start + chunk.total_compressed_size] = bytes([fill]) * chunk.total_compressed_size
    path.write_bytes(bytes(data))
    pq.ParquetFile(path)  # opens: the damage is found only when the middle is read
    return path


@pytest.mark.parametrize("fill", [0x00, 0xAB, 0xFF])
@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("column", ["family", "minimal_caption"])  # read first / in batches
def test_a_table_damaged_in_the_middle_is_refused_naming_it(
    d, tmp_path, capsys, fill, workers, column
):
    source = _damaged_in_the_middle(d, tmp_path / "concepts.parquet", fill, column)
    out = tmp_path / "bench.parquet"
    code = _call(["negatives", "--input", source, "--out", out, "--workers", workers])
    _one_line(capsys, code, "--input", "concepts.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["concepts.parquet"]


def test_a_library_message_with_line_breaks_is_printed_on_one_line(monkeypatch, capsys):
    from autocomp.cli import protocol
    from autocomp.errors import UsageError

    def broken(args):  # noqa: ANN001, ANN202
        raise UsageError("input_path", "x\ny", "a reason\nover two lines\r\n and a third")

    monkeypatch.setattr(protocol, "_negatives", broken)
    parser_run = _call(["negatives", "--input", "a.parquet", "--out", "b.parquet"])
    err = _one_line(capsys, parser_run, "--input", "a reason over two lines and a third")
    assert "'x\\ny'" in err  # the value is quoted as Python writes it, its break escaped


# 13. a run folder whose results/ holds a score run of another benchmark (its predictions name
#     samples this benchmark does not have) is refused naming that run, never reported under
#     this benchmark's scope and caveats
def _predictions(sample_ids: list[str], family: str) -> pa.Table:
    from autocomp.store.catalog.schemas import PREDICTIONS_SCHEMA

    rows = [{"model": "m2", "sample_id": s, "family": family, "n": 0, "condition": "contextual",
             "set": "swap", "protocol": "paper", "candidates": 2, "correct": True, "tie": False,
             "predicted": 0, "positive_score": 1.0, "best_negative_score": 0.0, "failed": False,
             "reason": None, "truncated": False, "score_type": "score", "options": None}
            for s in sample_ids]  # fmt: skip
    return pa.Table.from_pylist(rows, PREDICTIONS_SCHEMA)


@pytest.mark.parametrize(
    "ids",
    [
        ["sugarcrepe-swap_att-0/contextual", "sugarcrepe-swap_att-1/contextual"],
        ["color-n2-000000000000/minimal"],  # an Auto-Comp id of another draw
    ],
)
def test_a_score_run_of_another_benchmark_in_the_run_is_refused(d, tmp_path, capsys, ids):
    run = tmp_path / "run"
    shutil.copytree(d / "run", run)
    other = run / "results" / "m2"
    (other / "predictions").mkdir(parents=True)
    pq.write_table(
        _predictions(ids, "sugarcrepe-swap_att"), other / "predictions" / "part-00000.parquet"
    )
    (other / "run.json").write_text("{}")
    out = tmp_path / "report"
    code = _call(["report", "--run", run, "--out", out])
    _one_line(capsys, code, "--run", "m2", ids[0], "another benchmark")
    assert not out.exists()


# 12 (cont.): an input the user did not give is named without Python's None
def test_an_input_not_given_is_named_without_none(tmp_path, capsys):
    source = _release_json(tmp_path / "captions.json")
    code = _call(["import", "autocomp-release", "--source", source, "--out", tmp_path / "out"])
    err = _one_line(capsys, code, "--images", "give the folder")
    assert "None" not in err
    assert not (tmp_path / "out").exists()


# -------------------------------------------------------------------- 10: network deadlines
MUTE = "http://127.0.0.1:{port}"
NETWORK = [  # (id, argv, words); {port}: the silent server, as the KFP API or the S3 endpoint
    ("upload-kfp", ["upload", "--dist", V + "/dist", "--host", MUTE], []),
    ("submit-kfp", [*SUBMIT[:4], MUTE, *SUBMIT[5:]], []),
    ("schedule-list-kfp", ["schedule", "list", "--host", MUTE], []),
    ("resume-kfp", ["resume", "--dist", V + "/dist", "--host", MUTE, "run-1"], []),
    ("leaderboard-store", ["leaderboard", "--store", "s3://bucket/p", "--out", "{out}"], []),
    ("score-store", ["score", "--model", TINY, "--store", "s3://bucket/p", "--benchmark", "b",
                     "--out", "{out}"], []),
]  # fmt: skip


@pytest.mark.parametrize("argv, words", [c[1:] for c in NETWORK], ids=[c[0] for c in NETWORK])
def test_a_peer_that_never_answers_ends_within_the_deadline_with_one_line(
    argv, words, d, silent, tmp_path, capsys, monkeypatch
):
    import time

    from autocomp.network import ENV

    monkeypatch.setenv(ENV, "1")  # the one deadline, stated once, overridden here
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", MUTE.format(port=silent))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KFP_HOST", raising=False)
    out = tmp_path / "out"
    # first against a port that refuses at once: the same work but the wait (imports warm)
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", "http://127.0.0.1:9")
    refused = [a.replace("{d}", str(d)).replace("{out}", str(out)).replace("{port}", "9")
               for a in argv]  # fmt: skip
    started = time.monotonic()
    _call(refused)
    baseline = time.monotonic() - started
    capsys.readouterr()
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", MUTE.format(port=silent))
    args = [a.replace("{d}", str(d)).replace("{out}", str(out)).replace("{port}", str(silent))
            for a in argv]  # fmt: skip
    started = time.monotonic()
    code = _call(args)
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code in (1, 2), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    # a few deadlines (connect, read, the store's retries), never the default 60 s
    assert took - baseline < 15, (took, baseline)
    for word in words:
        assert word in err, (word, err)
    assert not out.exists()
