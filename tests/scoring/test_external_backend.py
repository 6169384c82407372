"""A scoring backend from a package outside autocomp, found through its entry point alone.

The package is written into tmp_path as a real distribution would be installed: a module and a
`pixelscore-0.1.dist-info` folder (METADATA, entry_points.txt), put on PYTHONPATH so that
importlib.metadata finds it without pip. Its backend really computes: the k-th colour word of a
caption against the mean colour of the image's k-th vertical strip (numpy over the PNG's
pixels). A model of it is registered through AUTOCOMP_MODEL_REGISTRY (which adds to the shipped
registry), then `autocomp models`, `autocomp score`, `autocomp report` and `autocomp compile`
run in subprocesses, as a user runs them, without a line of autocomp changed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from PIL import Image

import autocomp
from autocomp.config import NegativesConfig
from autocomp.protocol.stages import negatives_stage, sample_stage
from tests.conftest import pinned_images

BACKEND = "pixel_strips"
MODEL = "pixel-strips"
GROUP = "pixel statistics"
RGB = {"red": (255, 0, 0), "blue": (0, 0, 255), "green": (0, 128, 0), "yellow": (255, 255, 0),
       "orange": (255, 165, 0), "purple": (128, 0, 128), "pink": (255, 192, 203),
       "brown": (139, 69, 19), "black": (0, 0, 0), "gray": (128, 128, 128),
       "silver": (192, 192, 192), "gold": (255, 215, 0), "teal": (0, 128, 128),
       "maroon": (128, 0, 0), "navy": (0, 0, 128), "olive": (128, 128, 0),
       "lime": (0, 255, 0), "cyan": (0, 255, 255), "magenta": (255, 0, 255)}  # fmt: skip
WIDTH, HEIGHT = 48, 32

PACKAGE = '''
"""pixelscore: a third-party autocomp scoring backend (colour words against image strips)."""

from autocomp.scoring.backends import ScoringBackend

BACKEND = ScoringBackend(
    name="pixel_strips",
    scorer="pixelscore.scorer:StripScorer",
    group="pixel statistics",
    scores=("strip_distance",),
    batch_option="batch",
    optional=frozenset({"background"}),
    hub_ids=(),  # no weights: the cluster warm-up has nothing to fetch
)
'''

SCORER = '''
"""The k-th colour word of a caption against the mean colour of the image's k-th vertical strip
(as many strips as colour words): minus the mean RGB distance, over 255."""

import re

import numpy as np

from autocomp.scoring import Scorer

PALETTE = {RGB!r}


class StripScorer(Scorer):
    def __init__(self, entry, device=None, batch=64, **_):
        self.background = entry.value("background") or "white"
        self.calls = {{"images": 0, "texts": 0}}

    def _named(self, text):
        words = re.findall(r"[a-z]+", text.lower())
        return [PALETTE[w] for w in words if w in PALETTE and w != self.background]

    def score(self, requests, images):
        pixels, out = {{}}, []
        for r in requests:
            if r.image_key is None:
                raise ValueError("pixel_strips needs an image")
            if r.image_key not in pixels:
                image = images[r.image_key].convert("RGB")
                pixels[r.image_key] = np.asarray(image, dtype=np.float64)
                self.calls["images"] += 1
            self.calls["texts"] += 1
            named = np.array(self._named(r.text), dtype=np.float64)
            strips = np.array_split(pixels[r.image_key], len(named), axis=1)
            means = np.stack([s.reshape(-1, 3).mean(axis=0) for s in strips])
            out.append(float(-np.linalg.norm(means - named, axis=1).mean() / 255))
        return out

    def truncated(self, texts):
        return [False] * len(texts)

    def token_counts(self, texts):
        return None
'''


def write_package(root: Path) -> Path:
    """The package as pip would install it: the module and its dist-info folder."""
    (root / "pixelscore").mkdir(parents=True)
    (root / "pixelscore" / "__init__.py").write_text(PACKAGE)
    (root / "pixelscore" / "scorer.py").write_text(SCORER.format(RGB=RGB))
    info = root / "pixelscore-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pixelscore\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[autocomp.scoring_backends]\n{BACKEND} = pixelscore:BACKEND\n"
    )
    return root


def write_registry(path: Path) -> Path:
    entry = {"name": MODEL, "title": "Colour strips (numpy)", "backend": BACKEND,
             "score": "strip_distance", "weights": "none", "dtype": "float32", "gpus": 0,
             "gpu_memory_gb": 0, "trust_remote_code": False, "background": "white"}  # fmt: skip
    path.write_text(yaml.safe_dump({"models": [entry]}, sort_keys=False))
    return path


def write_run(run: Path) -> pa.Table:
    """run/benchmark.parquet (color, N=2) and its images: each object's colour painted as one
    vertical strip, left to right in caption order, on white."""
    sample_stage("color", 2, 6, 0, run / "c.parquet")
    negatives_stage(run / "c.parquet", run / "b.parquet", NegativesConfig(workers=1))
    table = pq.read_table(run / "b.parquet")
    (run / "images").mkdir()
    for i, row in enumerate(table.to_pylist()):
        image = Image.new("RGB", (WIDTH, HEIGHT), (255, 255, 255))
        strip = WIDTH // len(row["attributes"])
        for k, colour in enumerate(row["attributes"]):
            image.paste(RGB[colour], (k * strip, 0, (k + 1) * strip, HEIGHT))
        image.save(run / "images" / f"{i}.png")
    table = table.append_column("image", pa.array([f"{i}.png" for i in range(table.num_rows)]))
    table = table.append_column("condition", pa.array(["minimal"] * table.num_rows))
    pq.write_table(table, run / "benchmark.parquet")
    return table


def expected(attributes: list[str], caption: str) -> float:
    """The score by hand: the drawn strips are exact palette colours, so each strip's mean is
    the colour painted there."""
    named = [w for w in re.findall(r"[a-z]+", caption.lower()) if w in RGB]
    assert len(named) == len(attributes), caption
    distances = [
        sum((a - b) ** 2 for a, b in zip(RGB[drawn], RGB[said])) ** 0.5 / 255
        for drawn, said in zip(attributes, named)
    ]
    return -sum(distances) / len(distances)


def autocomp_cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    code = "import sys; from autocomp.cli.main import entry; sys.argv[0] = 'autocomp'; sys.exit(entry())"
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip


@pytest.fixture
def world(tmp_path):
    """The package, the registry that names its model, a run folder, and the environment a user
    would have: PYTHONPATH holding the package (and this autocomp), nothing else changed."""
    package = write_package(tmp_path / "site")
    registry = write_registry(tmp_path / "pixel-models.yaml")
    table = write_run(tmp_path / "run")
    source = str(Path(autocomp.__file__).parents[1])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "AUTOCOMP_MODEL_REGISTRY": str(registry),
           "PYTHONPATH": os.pathsep.join([str(package), source])}  # fmt: skip
    return tmp_path, env, table


@pytest.mark.slow
def test_an_entry_point_backend_runs_through_score_report_and_compile(world):
    tmp, env, table = world
    run = tmp / "run"

    listed = autocomp_cli(["models"], env, tmp)
    assert listed.returncode == 0, listed.stderr
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith(MODEL))
    assert row[:4] == [MODEL, BACKEND, "strip_distance", "none"]
    assert "tiny-clip" in listed.stdout  # the registry file added a model, replaced none

    scored = autocomp_cli(["score", "--model", MODEL, "--benchmark", str(run / "benchmark.parquet"),
                           "--images", str(run / "images"), "--out", str(run / "results"),
                           "--batch-size", "5"], env, tmp)  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    record = json.loads((run / "results" / MODEL / "run.json").read_text())
    assert record["entry"]["backend"] == BACKEND and record["batch_size"] == 5
    scores = pq.read_table(run / "results" / MODEL / "scores").to_pylist()
    rows = {f"{r['concept_id']}/minimal": r for r in table.to_pylist()}
    assert len(scores) == sum(1 + len(r["confusion_negatives"]) for r in rows.values())
    for s in scores:  # every score is the one computed by hand from the painted colours
        row = rows[s["sample_id"]]
        caption = [row["caption"], *row["confusion_negatives"]][s["candidate_index"]]
        assert s["score"] == pytest.approx(expected(row["attributes"], caption), abs=1e-12)
    summary = pq.read_table(run / "results" / MODEL / "summary.parquet").to_pylist()
    swap = next(r for r in summary if r["set"] == "swap" and r["protocol"] == "paper")
    assert (swap["items"], swap["accuracy"]) == (6, 1.0)  # a swap puts colours in wrong strips

    reported = autocomp_cli(["report", "--run", str(run), "--out", str(tmp / "report")], env, tmp)
    assert reported.returncode == 0, reported.stderr
    table5 = (tmp / "report" / "tables" / "paper_table5_minimal.csv").read_text().splitlines()
    mine = next(line.split(",") for line in table5 if f",{MODEL}," in line)
    assert mine[:3] == [GROUP, MODEL, "100.0"]  # its backend's group (not "other"), Swap 100 %
    assert GROUP in (tmp / "report" / "index.html").read_text()

    with pinned_images(tmp):  # compile needs an image lock: the pinned test lock
        compile_env = {**env, **{k: os.environ[k] for k in
                                 ("AUTOCOMP_IMAGE_LOCK", "AUTOCOMP_IMAGE_REGISTRY")}}  # fmt: skip
        compiled = autocomp_cli(["compile", "--out", str(tmp / "dist")], compile_env, tmp)
    assert compiled.returncode == 0, compiled.stderr
    spec = next(yaml.safe_load_all((tmp / "dist" / "evaluate_models.yaml").read_text()))
    selects = [t["inputs"]["parameters"] for t in spec["root"]["dag"]["tasks"].values()
               if t["componentRef"]["name"].startswith("comp-select-models")]  # fmt: skip
    members = {p["members"]["runtimeValue"]["constant"][0]: p for p in selects}
    mine = [p for p in selects if MODEL in p["members"]["runtimeValue"]["constant"]]
    assert len(mine) == 1, members  # scheduled in exactly one resource class
    assert MODEL in mine[0]["everything"]["runtimeValue"]["constant"]  # models=[all] takes it
    registries = [yaml.safe_load(c) for c in _registry_constants(spec)]
    entries = [m for r in registries for m in r["models"] if m["name"] == MODEL]
    # the score steps receive its entry (and collect, which merges a model's ranges, the same)
    assert entries and all(e == entries[0] for e in entries)
    assert entries[0]["backend"] == BACKEND


def _registry_constants(spec: dict) -> list[str]:
    found = []
    for component in spec["components"].values():
        for task in component.get("dag", {}).get("tasks", {}).values():
            given = task.get("inputs", {}).get("parameters", {}).get("registry", {})
            if "runtimeValue" in given:
                found.append(given["runtimeValue"]["constant"])
    return found


@pytest.mark.slow
def test_without_the_package_the_model_is_refused_in_one_line(world):
    tmp, env, _ = world
    env = {**env, "PYTHONPATH": str(Path(autocomp.__file__).parents[1])}
    result = autocomp_cli(["models"], env, tmp)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert BACKEND in result.stderr and "autocomp.scoring_backends" in result.stderr


def test_the_package_is_found_through_its_entry_point_in_process(tmp_path, monkeypatch):
    """The same discovery in this process: importlib.metadata reads the dist-info folder."""
    from autocomp.scoring import backends

    package = write_package(tmp_path / "site")
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setattr(backends, "_entry_points", _fresh(backends._entry_points))
    monkeypatch.setattr(backends, "_load_point", _fresh(backends._load_point))
    assert BACKEND in backends.names()
    found = backends.get(BACKEND)
    assert (found.group, found.scores, found.hub_ids) == (GROUP, ("strip_distance",), ())
    assert found.scorer_class().__name__ == "StripScorer"
    assert backends.group_of(BACKEND) == GROUP
    monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", str(write_registry(tmp_path / "r.yaml")))
    from autocomp.pipelines.cluster import warmup
    from autocomp.scoring.registry import all_models

    assert all_models()[MODEL].kind is found
    assert MODEL not in {w.model for w in warmup.wanted()}  # no weights to prefetch


def _fresh(cached):
    """An empty cache of the same function (the real one is cached per process)."""
    import functools

    return functools.lru_cache(maxsize=None)(cached.__wrapped__)
