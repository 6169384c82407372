"""`autocomp resume RUN_ID` against the KFP stand-in's run retry (POST /apis/v2beta1/runs/
{id}:retry, as run_server.go and resource_manager.go RetryRun answer it): a failed run is
retried in place; where the server cannot retry it a new run with the same parameters takes its
place; a run that succeeded, is still going, is in another namespace or was made by another
pipeline version is refused and nothing is changed."""

from __future__ import annotations

import pytest
import yaml

from autocomp.cli.main import main
from tests.pipelines.kfp_standin import KfpStandIn

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
