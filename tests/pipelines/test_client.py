"""The KFP client verbs against the stand-in as the real server behaves: authentication (a Dex
session cookie, tokens and their audience), multi-user namespaces and authorization, error
bodies, the backend version and its fallback, recurring runs' rules and draws, and what submit
and schedule refuse before any request."""

from __future__ import annotations

import json

import pytest

from autocomp.cli.main import main
from autocomp.errors import UsageError
from autocomp.pipelines.cluster.client import api_message, with_draw
from tests.pipelines.kfp_standin import KfpStandIn
from tests.pipelines.kube_standin import KubeStandIn

pytestmark = pytest.mark.slow


def _verb(verb: str, api: KfpStandIn, dist, *extra: str) -> list[str]:
    return [verb, "--host", api.host, "--dist", str(dist), *extra]


@pytest.fixture
def no_kubeconfig(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))


def test_multi_user_runs_go_to_the_profile_namespace_with_the_dex_cookie(dist_for, capsys):
    dist = dist_for()
    api = KfpStandIn(multi_user=True, users={"s3ss": "alice@example.com"},
                     access={"alice@example.com": {"team-a"}})  # fmt: skip
    login = ["--cookies", "oauth2_proxy_kubeflow=s3ss"]
    try:
        assert main(_verb("upload", api, dist, *login)) == 0  # shared pipelines: not checked
        run = ["--pipeline", "evaluate_models", "--name", "e", "--param", "name=b"]
        assert main(_verb("submit", api, dist, *login, *run)) == 2  # no namespace
        assert "multi-user mode: give your profile namespace" in capsys.readouterr().err
        assert main(_verb("submit", api, dist, *login, "--namespace", "team-b", *run)) == 2
        err = capsys.readouterr().err
        assert (
            "HTTP 403: User 'alice@example.com' is not authorized" in err and err.count("\n") == 1
        )
        assert main(_verb("submit", api, dist, *login, "--namespace", "team-a", *run)) == 0
    finally:
        api.close()
    (made,) = api.runs
    assert made["namespace"] == "team-a"
    assert {e["namespace"] for e in api.experiments.values()} == {"team-a"}
    assert main(_verb("submit", api, dist, "--namespace", "team-a", *run)) == 2  # no login at all


def test_a_service_account_token_needs_the_pipelines_audience(dist_for, tmp_path, capsys):
    dist = dist_for()
    api = KfpStandIn(multi_user=True, users={"sa-jwt": "system:serviceaccount:team-a:bot",
                                             "kube-jwt": "system:serviceaccount:team-a:bot"},
                     audiences={"kube-jwt": ["https://kubernetes.default.svc"]},
                     access={"system:serviceaccount:team-a:bot": {"team-a"}})  # fmt: skip
    token = tmp_path / "token"
    try:
        token.write_text("kube-jwt\n")  # the auto-mounted token: the API server's audience
        assert main(_verb("upload", api, dist, "--token-file", str(token))) == 2
        assert "audiences lack pipelines.kubeflow.org" in capsys.readouterr().err
        token.write_text("sa-jwt\n")  # `kubectl create token --audience pipelines.kubeflow.org`
        assert main(_verb("upload", api, dist, "--token-file", str(token))) == 0
    finally:
        api.close()


@pytest.mark.parametrize("where", ["token", "cookies"])
def test_a_header_value_with_a_line_break_is_a_usage_error_before_any_request(
    dist_for, monkeypatch, capsys, where
):
    api = KfpStandIn()
    try:
        if where == "token":
            monkeypatch.setenv("KFP_TOKEN", "abc\r\nX-Injected: 1")
            argv = _verb("upload", api, dist_for())
        else:
            argv = _verb("upload", api, dist_for(), "--cookies", "oauth2_proxy_kubeflow=a\nb")
        assert main(argv) == 2
    finally:
        api.close()
    err = capsys.readouterr().err
    assert f"{where}: " in err and "line break or control character" in err
    assert err.count("\n") == 1 and api.requests == []


def test_the_servers_error_bodies_are_read_in_every_form():
    class Refused(Exception):
        def __init__(self, status: int, body: dict) -> None:
            self.status, self.body = status, json.dumps(body)

    upload = Refused(409, {"error_message": "pipeline exists", "error_details": "x"})
    assert api_message(upload) == "HTTP 409: pipeline exists"  # pipeline_upload_server.go
    gateway = Refused(400, {"code": 3, "message": "Invalid input", "details": []})
    assert api_message(gateway) == "HTTP 400: Invalid input"  # grpc-gateway v2 (2.14+)
    old = Refused(400, {"error": "bad", "code": 3})
    assert api_message(old) == "HTTP 400: bad"  # grpc-gateway v1 (up to 2.5)


def test_an_upload_the_server_refuses_reports_its_error_message(dist_for, monkeypatch, capsys):
    import autocomp.pipelines.cluster.uploads as uploads

    api = KfpStandIn()
    try:
        assert main(_verb("upload", api, dist_for())) == 0
        monkeypatch.setattr(uploads, "_find_version", lambda client, p, package: (None, None))
        assert main(_verb("upload", api, dist_for())) == 2  # a second "first" upload
    finally:
        api.close()
    assert "HTTP 409: Failed to create a pipeline: pipeline autocomp-generate-benchmark exists" in (
        capsys.readouterr().err
    )


def test_the_version_comes_from_the_install_configmap_when_healthz_says_unknown(
    dist_for, monkeypatch, tmp_path, capsys
):
    dist = dist_for()
    api = KfpStandIn(tag_name="unknown")
    kube = KubeStandIn()
    run = ["--pipeline", "evaluate_models", "--name", "e", "--param", "name=b"]
    try:
        main(_verb("upload", api, dist))
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
        assert main(_verb("submit", api, dist, *run)) == 2
        assert "the server's KFP version is unknown" in capsys.readouterr().err
        assert main(_verb("submit", api, dist, "--kfp-version", "2.17.0", *run)) == 0
        monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig(tmp_path / "config")))
        kube.add("kubeflow", "configmaps", "pipeline-install-config", data={"appVersion": "2.14.3"})
        assert main(_verb("submit", api, dist, *run)) == 2  # compiled for 2.15+
        assert "runs KFP 2.14.3 (ConfigMap" in capsys.readouterr().err and len(api.runs) == 1
    finally:
        api.close()
        kube.close()


def test_a_recurring_generate_run_draws_anew_each_run(dist_for, no_kubeconfig, capsys):
    from autocomp.pipelines.cluster.plan import draw_seed, drawn

    dist = dist_for()
    api = KfpStandIn()
    schedule = ["--pipeline", "generate_benchmark", "--name", "w", "--cron", "@weekly",
                "--param", "name=weekly"]  # fmt: skip
    try:
        main(_verb("upload", api, dist))
        assert main(_verb("schedule", api, dist, *schedule)) == 0
        assert main(_verb("schedule", api, dist, *schedule, "--param", "draw=")) == 2
        assert "replays its first run from KFP's cache" in capsys.readouterr().err
        finetune = ["--pipeline", "finetune_models", "--name", "f", "--cron", "@weekly",
                    "--param", "name=b"]  # fmt: skip
        assert main(_verb("schedule", api, dist, *finetune)) == 2
        assert "recurring fine-tuning run would replay" in capsys.readouterr().err
    finally:
        api.close()
    (job,) = api.recurring
    assert job["trigger"]["cron_schedule"]["cron"] == "@weekly"
    assert job["runtime_config"]["parameters"]["draw"] == "{{workflow.uid}}"
    assert with_draw("evaluate_models", {"name": "b"}) == {"name": "b"}
    assert draw_seed(7, "") == 7 and draw_seed(7, "run-a") != draw_seed(7, "run-b")
    assert draw_seed(7, "run-a") == draw_seed(7, "run-a") < 2**32
    from autocomp.config import SampleConfig

    assert drawn(SampleConfig(specs="color:2", count=3, seed=7), "").seed == 7


def test_the_server_applies_the_recurring_run_rules_too(dist_for, no_kubeconfig):
    """What the API server refuses when a client skips the checks: KFP's own rules."""
    from autocomp.pipelines.cluster.client import connect, pinned_version

    dist = dist_for()
    api = KfpStandIn()
    try:
        main(_verb("upload", api, dist))
        client = connect(api.host)
        ids = pinned_version(client, "evaluate_models", dist / "evaluate_models.yaml")
        experiment = client.create_experiment("x").experiment_id

        def create(cron: str, concurrency: int) -> str:
            try:
                client.create_recurring_run(experiment_id=experiment, job_name="j",
                                            cron_expression=cron, max_concurrency=concurrency,
                                            params={"name": "b"}, pipeline_id=ids[0],
                                            version_id=ids[1])  # fmt: skip
            except Exception as exc:  # noqa: BLE001
                return api_message(exc)
            return "created"

        assert "Max concurrency of a recurring run must be at least 1 and at most 10" in create(
            "@weekly", 11
        )
        assert "Schedule cron is not a supported format" in create("0 0 25 * * *", 1)
        assert create("0 3 * * 1", 1) == "created"  # the server takes 5 fields (seconds first)
    finally:
        api.close()


@pytest.mark.parametrize(
    "store, message",
    [
        ("/data/runs", "a cluster run needs s3://bucket/prefix"),
        ("s3://Bad_Bucket/x", "is not an S3 bucket name"),
        ("s3://mlpipeline/../etc", "the prefix must be plain path components"),
        ("s3://mlpipeline/a b", "the prefix must be plain path components"),
    ],
)
def test_submit_refuses_a_store_the_pods_cannot_share(dist_for, capsys, store, message):
    api = KfpStandIn()
    try:
        argv = _verb("submit", api, dist_for(), "--pipeline", "evaluate_models", "--name", "e",
                     "--param", "name=b", "--param", f"store={store}")  # fmt: skip
        assert main(argv) == 2
    finally:
        api.close()
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and api.requests == []


def test_submit_refuses_a_run_name_that_is_empty_or_not_printable(dist_for, capsys):
    api = KfpStandIn()
    try:
        for name in ("", " ", "a\nb"):
            argv = _verb("submit", api, dist_for(), "--pipeline", "evaluate_models",
                         "--name", name, "--param", "name=b")  # fmt: skip
            assert main(argv) == 2
    finally:
        api.close()
    assert capsys.readouterr().err.count("must be a name of letters") == 3 and api.requests == []


def test_a_token_file_and_the_poddefault_variable_are_read(tmp_path, monkeypatch):
    from autocomp.pipelines.cluster.client import read_token

    token = tmp_path / "token"
    token.write_text("eyJhbGciOi.payload.sig\n")  # what `kubectl create token` prints
    assert read_token(str(token)) == "eyJhbGciOi.payload.sig"
    monkeypatch.setenv("KF_PIPELINES_SA_TOKEN_PATH", str(token))
    assert read_token(None) == "eyJhbGciOi.payload.sig"
    with pytest.raises(UsageError, match="^token_file: .*cannot be read"):
        read_token(str(tmp_path / "absent"))
