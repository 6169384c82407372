"""A recurring run is the whole loop (issue 33): one schedule of generate_and_evaluate, fired by
the KFP stand-in's ScheduledWorkflow tick and run here through the uploaded package's own YAML
(tests/pipelines/kfp_runs.py), publishes a benchmark under `<name>-<run id>` and scores it in
the same run, with moto's S3 server as the store; a score step that fails fails the run inside
evaluate_models and leaves the published benchmark in the store."""

from __future__ import annotations

import json

import pytest
from minio import Minio

from autocomp.cli.main import main
from autocomp.pipelines.cluster.plan import published_name
from tests.infra.test_storage import s3_env, s3_server  # noqa: F401  (moto_server fixtures)
from tests.pipelines.kfp_runs import execute
from tests.pipelines.kfp_standin import KfpStandIn

# each test runs generate_and_evaluate once through kfp.local: about 5 minutes alone here,
# past pytest's 15-minute timeout on a loaded machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

STORE = "s3://autocomp/loop"
LEAN = {  # the tiny models, and the least generation that publishes a benchmark
    "specs": "color:2", "count": 2, "num_shards": 1, "captioner": "tiny-llm",
    "caption_engine": "transformers", "caption_fallback": "minimal", "renderer": "tiny-sd3",
    "detector": "tiny-grounding-dino", "segmenter": "tiny-sam2", "vqa": "tiny-qwen2.5-vl",
    "masks": "boxes", "keep_rejected": True, "store": STORE,
}  # fmt: skip


@pytest.fixture
def api(dist_for, s3_env, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("AUTOCOMP_CACHE", str(tmp_path / "cache"))
    standin = KfpStandIn()
    standin.executor = lambda docs, params, run_id: execute(docs, params, run_id,
                                                            tmp_path / run_id)  # fmt: skip
    dist = dist_for()
    assert main(["upload", "--host", standin.host, "--dist", str(dist),
                 "--pipeline", "generate_and_evaluate"]) == 0  # fmt: skip
    standin.dist = dist
    yield standin
    standin.close()


def _schedule(api: KfpStandIn, models: list[str]) -> dict:
    params = {**LEAN, "name": "weekly", "models": json.dumps(models)}
    argv = ["schedule", "--host", api.host, "--dist", str(api.dist),
            "--pipeline", "generate_and_evaluate", "--name", "weekly", "--cron", "@weekly",
            "--store-capacity", "1Gi"]  # fmt: skip
    for key, value in params.items():
        argv += ["--param", f"{key}={str(value).lower() if value is True else value}"]
    assert main(argv) == 0
    (swf,) = api.recurring  # one per name: a changed schedule replaces the last one
    return swf


def _client(s3_env) -> Minio:  # noqa: F811
    return Minio(f"127.0.0.1:{s3_env.port}", "testing", "testing", secure=False)


def _keys(s3_env, prefix: str) -> set[str]:  # noqa: F811
    found = _client(s3_env).list_objects("autocomp", prefix=f"loop/{prefix}", recursive=True)
    return {o.object_name.removeprefix("loop/") for o in found}


def test_one_schedule_publishes_a_benchmark_and_its_scores(api, s3_env, capsys):  # noqa: F811
    swf = _schedule(api, ["tiny-clip"])
    assert swf["runtime_config"]["parameters"]["draw"] == "{{workflow.uid}}"
    run = api.fire(swf["recurring_run_id"])
    assert run["state"] == "SUCCEEDED", run.get("error")
    name = published_name("weekly", run["run_id"], True)
    assert run["runtime_config"]["parameters"]["draw"] == run["run_id"]  # a new draw per run
    benchmark = _keys(s3_env, f"benchmarks/{name}/")
    assert f"benchmarks/{name}/README.md" in benchmark
    assert any(k.startswith(f"benchmarks/{name}/data/test-") for k in benchmark)
    card = _client(s3_env).get_object("autocomp", f"loop/benchmarks/{name}/README.md").read()
    assert "| renderer | tiny-sd3 | random |" in card.decode()  # the generator, by the card
    assert "**Untrained models:" in card.decode()
    scored = _keys(s3_env, f"results/{name}/tiny-clip/")
    assert f"results/{name}/tiny-clip/summary.parquet" in scored, sorted(scored)


def test_a_failed_score_step_fails_the_run_at_evaluation_and_keeps_the_benchmark(
    api,
    s3_env,  # noqa: F811
    capsys,
):
    # a registered model whose weights this offline machine cannot fetch: its score step fails
    swf = _schedule(api, ["clip-vit-b-16"])
    run = api.fire(swf["recurring_run_id"])
    assert run["state"] == "FAILED"
    failed = [t["display_name"] for t in run["run_details"]["task_details"]]
    assert failed[-1] == "autocomp-evaluate-models" and failed[0].startswith("score-"), failed
    assert "autocomp-generate-benchmark" not in failed
    name = published_name("weekly", run["run_id"], True)
    assert f"benchmarks/{name}/README.md" in _keys(s3_env, f"benchmarks/{name}/")
    assert not _keys(s3_env, f"results/{name}/clip-vit-b-16/summary.parquet")
