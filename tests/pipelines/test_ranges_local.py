"""evaluate_models under kfp.local with a model's parts cut into ranges: one pod per range, the
class's collect step merges them, and the published run is byte-identical to one pod's."""

from __future__ import annotations

import shutil

import pytest

from autocomp.config import ScoreConfig
from autocomp.pipelines.local.run import LocalRun, local_arguments
from autocomp.scoring import score
from autocomp.store.catalog.benchmarks import open_published
from autocomp.store.publish import publish_stage
from tests.finetune.conftest import make_benchmark

pytestmark = pytest.mark.slow


def _files(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}  # fmt: skip


def test_a_model_scored_in_three_ranges_publishes_what_one_pod_does(tmp_path):
    bench = make_benchmark(tmp_path / "bench", 3)  # 6 rows of 16 candidates: 6 parts of 16
    store = tmp_path / "store"
    publish_stage(bench, bench.parent / "images", tmp_path / "work", str(store), "r")
    _, evaluate = local_arguments("tiny", ["tiny-clip"], max_candidates=16)
    with LocalRun(tmp_path / "run", offline=True, tty=False) as session:
        session.run("evaluate_models", name="r", store=str(store), score_ranges=3, **evaluate)
    logs = {p.stem for p in (tmp_path / "run" / "logs").glob("score-*.log")}
    assert logs == {f"score-cpu-tiny-clip-{k}-of-3" for k in (1, 2, 3)}  # one pod a range
    ranged = _files(store / "results" / "r" / "tiny-clip")
    assert sum(k.startswith("predictions/part-") for k in ranged) == 6
    shutil.rmtree(store / "results")
    shutil.rmtree(store / "work")
    config = ScoreConfig(max_candidates=16)  # the tiny profile's score settings otherwise
    source = open_published(str(store), "r")
    score(["tiny-clip"], source, tmp_path / "one", config, store=str(store), results="results/r")
    assert _files(store / "results" / "r" / "tiny-clip") == ranged
