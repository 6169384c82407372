"""`autocomp resume RUN_ID` against the KFP stand-in's run retry (POST /apis/v2beta1/runs/
{id}:retry, as run_server.go and resource_manager.go RetryRun answer it): a failed run is
retried in place; where the server cannot retry it a new run with the same parameters takes its
place; a run that succeeded, is still going, is in another namespace or was made by another
pipeline version is refused and nothing is changed."""

from __future__ import annotations

import pytest
import yaml

from autocomp.cli.main import main
from tests.infra.test_storage import s3_env, s3_server  # noqa: F401  (moto_server fixtures)
from tests.pipelines.kfp_standin import KfpStandIn
from tests.score_steps import published, score_executor

pytestmark = pytest.mark.slow

RUN = ["--pipeline", "evaluate_models", "--name", "e", "--param", "name=b"]


@pytest.fixture
def no_kubeconfig(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))


def _submitted(api: KfpStandIn, dist, capsys, *login: str) -> dict:
    base = ["--host", api.host, "--dist", str(dist), *login]
    assert main(["upload", *base]) == 0
    assert main(["submit", *base, *RUN]) == 0
    capsys.readouterr()
    return api.runs[-1]


def _resume(api: KfpStandIn, dist, run_id: str, *extra: str) -> int:
    return main(["resume", "--host", api.host, "--dist", str(dist), *extra, run_id])


def test_a_failed_run_is_retried_in_place(dist_for, no_kubeconfig, capsys):
    dist = dist_for()
    api = KfpStandIn()
    try:
        run = _submitted(api, dist, capsys)
        run["state"] = "FAILED"  # a score pod lost with its node: an Argo error
        assert _resume(api, dist, run["run_id"]) == 0
        assert capsys.readouterr().out.startswith(f"run {run['run_id']}: retried")
        assert run["state"] == "RUNNING" and run["retries"] == 1
        assert len(api.runs) == 1  # no new run
        retry = [r for r in api.requests if r["path"].endswith(":retry")]
        assert [r["path"] for r in retry] == [f"/apis/v2beta1/runs/{run['run_id']}:retry"]
    finally:
        api.close()


@pytest.mark.parametrize("refusal", ["missing", "offloaded"])
def test_where_the_server_cannot_retry_a_new_run_takes_its_place(
    dist_for, no_kubeconfig, capsys, refusal
):
    dist = dist_for()
    api = KfpStandIn()
    try:
        run = _submitted(api, dist, capsys)
        run["state"] = "FAILED"
        if refusal == "missing":
            api.retry_missing = True
        else:
            api.retry_refusals = {run["run_id"]: "Cannot retry workflow with offloaded node status"}
        assert _resume(api, dist, run["run_id"]) == 0
        out, err = capsys.readouterr()
        assert "a new run in place of" in out and "cannot retry" in err
        old, new = api.runs
        assert old["state"] == "FAILED"  # left as it was
        assert new["runtime_config"] == old["runtime_config"]  # the same parameters and store
        assert new["pipeline_version_reference"] == old["pipeline_version_reference"]
        assert new["experiment_id"] == old["experiment_id"]
    finally:
        api.close()


@pytest.mark.parametrize(
    ("state", "words"),
    [("SUCCEEDED", "nothing to resume"), ("RUNNING", "once it has failed")],
)
def test_a_run_that_succeeded_or_still_goes_is_refused_and_unchanged(
    dist_for, no_kubeconfig, capsys, state, words
):
    dist = dist_for()
    api = KfpStandIn()
    try:
        run = _submitted(api, dist, capsys)
        run["state"] = state
        assert _resume(api, dist, run["run_id"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0]
        assert run["state"] == state and "retries" not in run and len(api.runs) == 1
        assert not [r for r in api.requests if r["path"].endswith(":retry")]
    finally:
        api.close()


def test_a_run_of_another_namespace_is_refused(dist_for, capsys):
    dist = dist_for()
    api = KfpStandIn(multi_user=True, users={"s3ss": "alice@example.com"},
                     access={"alice@example.com": {"team-a", "team-b"}})  # fmt: skip
    login = ["--cookies", "oauth2_proxy_kubeflow=s3ss"]
    try:
        run = _submitted(api, dist, capsys, *login, "--namespace", "team-a")
        run["state"] = "FAILED"
        assert _resume(api, dist, run["run_id"], *login, "--namespace", "team-b") == 2
        err = capsys.readouterr().err
        assert "belongs to namespace team-a, not team-b" in err and err.count("\n") == 1
        assert run["state"] == "FAILED" and len(api.runs) == 1
        assert not [r for r in api.requests if r["path"].endswith(":retry")]
    finally:
        api.close()


def test_a_run_of_another_pipeline_version_is_refused(dist_for, no_kubeconfig, capsys, tmp_path):
    dist = dist_for()
    api = KfpStandIn()
    try:
        run = _submitted(api, dist, capsys)
        run["state"] = "FAILED"
        changed = tmp_path / "dist"
        changed.mkdir()
        for path in dist.glob("*.yaml"):
            docs = list(yaml.safe_load_all(path.read_text()))
            docs[0]["pipelineInfo"]["description"] = (
                "changed " + docs[0]["pipelineInfo"]["description"]
            )
            (changed / path.name).write_text(yaml.safe_dump_all(docs))
        assert main(["upload", "--host", api.host, "--dist", str(changed)]) == 0
        capsys.readouterr()
        assert _resume(api, changed, run["run_id"]) == 2
        err = capsys.readouterr().err
        assert "was made by another version of evaluate_models" in err and err.count("\n") == 1
        assert run["state"] == "FAILED" and len(api.runs) == 1
    finally:
        api.close()


def test_an_unknown_run_is_one_line(dist_for, no_kubeconfig, capsys):
    api = KfpStandIn()
    try:
        assert _resume(api, dist_for(), "no-such-run") == 2
    finally:
        api.close()
    err = capsys.readouterr().err
    assert "no such run" in err and err.count("\n") == 1


# ----------------------------------------------------------------------------- a lost node


def _benchmark(folder, store: str, name: str) -> None:
    """A published benchmark big enough for dozens of committed score parts (16 candidates
    each): Color N=3, 40 concepts in both conditions, with images, published to `store`."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    from autocomp.config import NegativesConfig
    from autocomp.protocol.stages import negatives_stage, sample_stage
    from autocomp.store.publish import publish_stage

    sample_stage("color", 3, 40, 0, folder / "concepts.parquet")
    rows = []
    for i, r in enumerate(pq.read_table(folder / "concepts.parquet").to_pylist()):
        for condition in ("minimal", "contextual"):
            path = folder / "images" / f"{r['concept_id']}-{condition}.png"
            path.parent.mkdir(exist_ok=True)
            Image.new("RGB", (24, 24), (i * 4 % 256, 90, 200)).save(path)
            rows.append({**r, "sample_id": f"{r['concept_id']}/{condition}",
                         "condition": condition, "caption": r["minimal_caption"],
                         "image": path.name})  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows), folder / "curated.parquet")
    negatives_stage(
        folder / "curated.parquet", folder / "bench.parquet", NegativesConfig(workers=1)
    )
    publish_stage(folder / "bench.parquet", folder / "images", folder / "work", store, name)


def _score_process(run_root) -> int | None:
    """The pid of the score step's executor of one run (its root on the command line)."""
    return score_executor(lambda _, cmdline: str(run_root) in cmdline)


@pytest.mark.timeout(2400)  # three runs of evaluate_models through kfp.local
def test_a_score_step_killed_with_sigkill_is_resumed_by_retry_to_the_uninterrupted_result(
    dist_for,
    no_kubeconfig,
    s3_env,  # noqa: F811
    tmp_path,
    capsys,
):
    """A real score process SIGKILLed half-way (a lost node) fails the run; `autocomp resume`
    retries it through the stand-in's endpoint, the failed step resumes from its committed parts
    and publishes exactly what an uninterrupted run published."""
    import os
    import signal
    import threading
    import time

    from autocomp.store.stores import open_store
    from tests.pipelines.kfp_runs import execute

    uri, name, model = "s3://autocomp/lost-node", "b", "tiny-clip"
    _benchmark(tmp_path, uri, name)
    store = open_store(uri)
    dist = dist_for()
    api = KfpStandIn()
    api.executor = lambda docs, params, run_id: execute(docs, params, run_id, tmp_path / run_id)
    params = ["--param", f"name={name}", "--param", f"store={uri}",
              "--param", f"models=[{model}]", "--param", "max_candidates=16"]  # fmt: skip
    base = ["--host", api.host, "--dist", str(dist)]
    try:
        assert main(["upload", *base, "--pipeline", "evaluate_models"]) == 0
        # the uninterrupted run: what every resumed run must publish
        assert (
            main(["submit", *base, "--pipeline", "evaluate_models", "--name", "ref", *params]) == 0
        )
        assert api.execute(api.runs[-1])["state"] == "SUCCEEDED"
        reference = published(store, f"results/{name}/{model}")
        assert len([p for p in reference if p.startswith("predictions/")]) > 4
        store.delete(f"results/{name}")
        # the same run again, its score pod lost half-way: SIGKILL once two parts are committed
        assert (
            main(["submit", *base, "--pipeline", "evaluate_models", "--name", "lost", *params]) == 0
        )
        run = api.runs[-1]
        going = threading.Thread(target=api.execute, args=(run,))
        going.start()
        deadline, killed = time.time() + 900, None
        while killed is None:
            assert going.is_alive(), run.get("error")
            assert time.time() < deadline, "the score step never committed two parts"
            committed = [o for o in store.list("work/score") if o.key.endswith("/_manifest.json")]
            pid = _score_process(tmp_path / run["run_id"])
            if len(committed) >= 2 and pid is not None:
                os.kill(pid, signal.SIGKILL)
                killed = len(committed)
            time.sleep(0.05)
        going.join(600)
        assert run["state"] == "FAILED"
        assert run["run_details"]["task_details"][0]["display_name"].startswith("score-")
        assert store.manifest(f"results/{name}/{model}") is None  # nothing published half-way
        capsys.readouterr()
        assert _resume(api, dist, run["run_id"]) == 0
        api.retried[run["run_id"]].join(900)  # the retried workflow, run to its end
        said = capsys.readouterr().out.splitlines()  # with kfp.local's log of the retried run
        assert any(line.startswith(f"run {run['run_id']}: retried") for line in said)
        assert run["state"] == "SUCCEEDED" and run["retries"] == 1 and len(api.runs) == 2
        assert published(store, f"results/{name}/{model}") == reference
        assert store.list("work/score") == []  # the parts are cleared once the run is published
    finally:
        api.close()
