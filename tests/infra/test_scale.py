"""The data flow at scale, small: both pipelines through kfp.local against an S3 server (moto on
127.0.0.1) with a per-task probe (benchmarks/scale_simulation.py at a few hundred concepts): no
image ever passes through a KFP artifact, the streaming steps stay within their bounds, the
published benchmark is `datasets`-readable; and a score step killed half-way (SIGKILL) resumes
from its committed parts and publishes exactly what the uninterrupted run published."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.infra.test_storage import s3_server  # noqa: F401  (the moto server fixture)
from tests.score_steps import published, score_executor

pytestmark = [pytest.mark.slow, pytest.mark.infra]

ROOT = Path(__file__).resolve().parents[2]
CONCEPTS = 200
MODELS = ("tiny-clip", "tiny-siglip")
SMALL_PARTS = {"max_candidates": 64}  # dozens of parts: a kill lands between two commits
SCORE = "score-cpu K=1"  # the score step of the one evaluation (scale_simulation names it by K)


def _simulation():
    spec = importlib.util.spec_from_file_location(
        "scale_simulation", ROOT / "benchmarks" / "scale_simulation.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture(scope="module")
def s3(s3_server):  # noqa: F811
    saved = {k: os.environ.get(k) for k in ("AUTOCOMP_S3_ENDPOINT", "AWS_ACCESS_KEY_ID",
                                             "AWS_SECRET_ACCESS_KEY", "PYTHONPATH")}  # fmt: skip
    os.environ.update({"AUTOCOMP_S3_ENDPOINT": f"http://127.0.0.1:{s3_server}",
                       "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"})  # fmt: skip
    yield "s3://autocomp/scale-test"
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def simulated(s3, tmp_path_factory):
    out = tmp_path_factory.mktemp("scale") / "run"
    figures = _simulation().run(CONCEPTS, out, s3, MODELS, ranges=(1,), **SMALL_PARTS)
    return out, s3, figures


def test_no_image_passes_through_an_artifact_and_streaming_steps_stay_bounded(simulated):
    out, store, figures = simulated
    steps = figures["steps"]
    # one evaluation, with one score range per model: its steps are named with K=1
    assert {"render", "validate", "curate", "publish", SCORE, "report K=1"} <= set(steps)
    # the artifacts kfp.local kept (every output of every task) hold no image and no benchmark
    artifacts = [p for p in (out / "kfp").rglob("*") if p.is_file()]
    figures_of_report = [p for p in artifacts if "figures" in p.parts]  # the report's PNGs
    assert not [p for p in artifacts if p.suffix == ".png" and p not in figures_of_report]
    assert not [p for p in artifacts if "data/test-" in p.as_posix()]
    assert sum(p.stat().st_size for p in artifacts) < 5e6
    images = 2 * CONCEPTS
    # render wrote every image to the store and nothing to its disk; validate read them back
    assert steps["render"]["written"] > images * 500 and steps["render"]["peak_disk"] < 1e6
    assert steps["validate"]["read"] >= steps["render"]["written"] * 0.9
    # publish and the score steps hold a few parts whatever the benchmark's size
    assert steps["publish"]["peak_disk"] < 5e6 and steps[SCORE]["peak_disk"] < 1e6
    assert figures["store"]["benchmarks"] > images * 500  # the images, embedded


def test_the_published_benchmark_is_datasets_readable_from_the_store(simulated, tmp_path):
    import datasets

    from autocomp.store.stores import open_store

    _, store, figures = simulated
    folder = tmp_path / "bench"
    open_store(store).get(f"benchmarks/{figures['name']}", folder)
    files = sorted(str(p) for p in (folder / "data").glob("*.parquet"))
    rows = datasets.load_dataset("parquet", data_files=files, split="train")
    assert rows.num_rows == 2 * CONCEPTS  # the tiny profile keeps rejected samples
    assert rows[0]["image"].size == (32, 32) and len(rows[0]["confusion_negatives"]) > 0


def _parent(pid: int) -> int:
    """The parent pid of `pid` (0 once it is gone): field 4 of /proc/PID/stat, read after the
    command's closing parenthesis (a command may hold spaces and parentheses)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])


def _descends_from(pid: int, root: int) -> bool:
    while pid > 1:
        if pid == root:
            return True
        pid = _parent(pid)
    return False


def _score_process(model: str, root: int) -> int | None:
    """The pid of the kfp.local task scoring `model` under the process `root`, if one runs
    (only this test's own: another test's or another run's score step is never touched)."""
    return score_executor(
        lambda pid, cmdline: f'"{model}"' in cmdline and _descends_from(pid, root)
    )


def test_a_killed_score_step_resumes_exactly_and_scores_only_what_is_missing(simulated, tmp_path):
    from autocomp.store.stores import open_store

    out, uri, figures = simulated
    store, name, model = open_store(uri), figures["name"], "tiny-clip"
    reference = published(store, f"results/{name}/{model}")  # the uninterrupted run's
    assert len([p for p in reference if p.startswith("predictions/")]) > 10
    store.delete(f"results/{name}")
    store.delete("work/score")
    script = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('s', {str(ROOT / 'benchmarks' / 'scale_simulation.py')!r}); "
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
        f"m.run({CONCEPTS}, __import__('pathlib').Path({str(tmp_path / 'killed')!r}), {uri!r}, "
        f"({model!r},), pipelines=('evaluate_models',), ranges=(1,), max_candidates=64)"
    )  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=os.environ.copy())  # fmt: skip
    deadline, killed = time.time() + 600, None
    while killed is None:
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
        assert time.time() < deadline, "the score step never committed two parts"
        committed = [o for o in store.list("work/score") if o.key.endswith("/_manifest.json")]
        pid = _score_process(model, proc.pid)
        if len(committed) >= 2 and pid is not None:
            os.kill(pid, signal.SIGKILL)  # half-way: between two commits, or inside one
            killed = len(committed)
        time.sleep(0.05)
    assert proc.wait(300) != 0  # the pipeline failed with its task
    assert store.manifest(f"results/{name}/{model}") is None  # nothing published half-way
    # again: the committed parts are kept, only the rest is scored, the same run is published
    _simulation().run(CONCEPTS, tmp_path / "again", uri, (model,),
                      pipelines=("evaluate_models",), ranges=(1,), **SMALL_PARTS)  # fmt: skip
    log = (tmp_path / "again" / "logs" / f"score-cpu-{model}.log").read_text()
    note = next(line for line in log.splitlines() if "resuming after" in line)
    parts = int(note.split("resuming after ")[1].split()[0])
    total = len([p for p in reference if p.startswith("predictions/")])
    assert parts in (killed, killed + 1) and parts < total, note  # a commit may end as we kill
    assert published(store, f"results/{name}/{model}") == reference
    assert store.list("work/score") == []  # the parts are cleared once the run is published
