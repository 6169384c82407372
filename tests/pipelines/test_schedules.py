"""Recurring runs by name against the KFP stand-in (its RecurringRunService as job_server.go
serves it): `autocomp schedule` is idempotent by name, `schedule list|pause|resume|delete`
manage them; `submit` says the run's id, its UI page and the name its benchmark is published
under; a package compiled for another backend is refused with both versions and the compile
command that fits."""

from __future__ import annotations

import re

import pytest

from autocomp.cli.main import main
from autocomp.pipelines.cluster.plan import published_name
from tests.pipelines.kfp_standin import KfpStandIn

pytestmark = pytest.mark.slow

# a store of the user's own, declared big enough for the default count (KFP's own 20 Gi is not)
ROOM = ["--store-capacity", "10Ti"]
WEEKLY = ["--pipeline", "generate_benchmark", "--name", "weekly", "--param", "name=weekly", *ROOM]


def _verb(verb: str, api: KfpStandIn, dist, *extra: str) -> list[str]:
    return [verb, "--host", api.host, "--dist", str(dist), *extra]


@pytest.fixture
def api(dist_for):
    api = KfpStandIn()
    assert main(_verb("upload", api, dist_for())) == 0
    yield api
    api.close()


def _sent(api: KfpStandIn, method: str) -> list[str]:
    return [r["path"] for r in api.requests if r["method"] == method]


def test_scheduling_a_name_twice_keeps_one_recurring_run(api, dist_for, capsys):
    dist = dist_for()
    capsys.readouterr()
    assert main(_verb("schedule", api, dist, *WEEKLY, "--cron", "@weekly")) == 0
    first = capsys.readouterr().out
    (made,) = api.recurring
    assert f"recurring run {made['recurring_run_id']} (weekly)" in first and "created" in first
    assert made["runtime_config"]["parameters"]["draw"] == "{{workflow.uid}}"
    posts = len(_sent(api, "POST"))
    assert main(_verb("schedule", api, dist, *WEEKLY, "--cron", "@weekly")) == 0
    assert "exists as asked, unchanged" in capsys.readouterr().out
    assert api.recurring == [made]
    assert _sent(api, "POST")[posts:] == [] and _sent(api, "DELETE") == []  # nothing sent
    # a changed schedule replaces the old one: created first, then the old one deleted
    assert main(_verb("schedule", api, dist, *WEEKLY, "--cron", "0 0 3 * * 1")) == 0
    said = capsys.readouterr().out
    (now,) = api.recurring
    assert now["recurring_run_id"] != made["recurring_run_id"]
    assert now["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * 1"
    assert f"replaced {made['recurring_run_id']}" in said
    assert _sent(api, "DELETE") == [f"/apis/v2beta1/recurringruns/{made['recurring_run_id']}"]


def test_list_pause_resume_delete_by_name(api, dist_for, capsys):
    dist = dist_for()
    assert main(_verb("schedule", api, dist, *WEEKLY, "--cron", "@weekly")) == 0
    other = ["--pipeline", "evaluate_models", "--name", "nightly", "--param", "name=weekly-x"]
    assert main(_verb("schedule", api, dist, *other, "--cron", "@daily")) == 0
    weekly, nightly = api.recurring
    capsys.readouterr()
    assert main(_verb("schedule", api, dist, "list")) == 0
    table = capsys.readouterr().out
    assert re.search(rf"weekly\s+{weekly['recurring_run_id']}\s+ENABLED\s+@weekly", table)
    assert re.search(rf"nightly\s+{nightly['recurring_run_id']}\s+ENABLED\s+@daily", table)

    assert main(_verb("schedule", api, dist, "pause", "--name", "weekly")) == 0
    assert capsys.readouterr().out.strip().endswith("(weekly): paused")
    assert (weekly["status"], nightly["status"]) == ("DISABLED", "ENABLED")
    rid = weekly["recurring_run_id"]
    assert _sent(api, "POST")[-1] == f"/apis/v2beta1/recurringruns/{rid}:disable"
    assert main(_verb("schedule", api, dist, "list", "--name", "weekly")) == 0
    listed = capsys.readouterr().out
    assert "DISABLED" in listed and "nightly" not in listed
    assert main(_verb("schedule", api, dist, "resume", "--name", "weekly")) == 0
    assert weekly["status"] == "ENABLED"
    assert _sent(api, "POST")[-1] == f"/apis/v2beta1/recurringruns/{rid}:enable"

    assert main(_verb("schedule", api, dist, "delete", "--name", "weekly")) == 0
    assert api.recurring == [nightly]
    # an unknown name: one line, exit 2, nothing changed
    capsys.readouterr()
    assert main(_verb("schedule", api, dist, "delete", "--name", "weekly")) == 2
    err = capsys.readouterr().err
    assert "name: 'weekly': no recurring run has that name" in err and err.count("\n") == 1
    assert api.recurring == [nightly] and len(_sent(api, "DELETE")) == 1
    assert main(_verb("schedule", api, dist, "pause")) == 2  # no --name
    assert "needs --name" in capsys.readouterr().err


def test_schedule_without_its_flags_is_one_line(api, dist_for, capsys):
    assert main(_verb("schedule", api, dist_for(), "--pipeline", "generate_benchmark")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs --name to create a recurring run" in err


def test_submit_says_the_run_its_page_and_the_published_name(api, dist_for, capsys):
    capsys.readouterr()
    run = ["--pipeline", "generate_benchmark", "--name", "paper-run", "--param", "name=paper-run",
           *ROOM]  # fmt: skip
    assert main(_verb("submit", api, dist_for(), *run)) == 0
    out = capsys.readouterr().out
    (made,) = api.runs
    rid = made["run_id"]
    assert f"run {rid}: generate_benchmark" in out
    assert f"ui:        {api.host}/#/runs/details/{rid}" in out
    name = published_name("paper-run", rid, True)
    assert name == f"paper-run-{rid.replace('-', '')[:8]}"
    assert f"publishes: {name} (evaluate_models: --param name={name})" in out
    assert main(_verb("submit", api, dist_for(), "--pipeline", "evaluate_models", "--name", "e",
                      "--param", f"name={name}")) == 0  # fmt: skip
    assert "publishes" not in capsys.readouterr().out


def test_a_package_for_another_backend_names_both_and_the_command_that_fits(dist_for, capsys):
    dist = dist_for()  # compiled for the default target, 2.15 and later
    api = KfpStandIn(tag_name="2.5.0")
    try:
        assert main(_verb("upload", api, dist)) == 0
        run = ["--pipeline", "evaluate_models", "--name", "e", "--param", "name=b"]
        assert main(_verb("submit", api, dist, *run)) == 2
    finally:
        api.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kfp_version" not in err and "kfp-version" not in err
    assert f"dist: '{dist}/evaluate_models.yaml': compiled for KFP 2.15.0 and later" in err
    assert f"the server at {api.host} runs KFP 2.5.0 (healthz tag_name)" in err
    assert f"recompile for it: autocomp compile --out {dist} --backend 2.5.0" in err
    assert [r for r in api.requests if r["path"].endswith("/runs")] == []


def test_multi_user_schedules_are_per_namespace(dist_for, capsys):
    dist = dist_for()
    api = KfpStandIn(multi_user=True, users={"s3ss": "alice@example.com", "b0b": "bob@x.org"},
                     access={"alice@example.com": {"team-a"}, "bob@x.org": {"team-b"}})  # fmt: skip
    alice = ["--cookies", "oauth2_proxy_kubeflow=s3ss", "--namespace", "team-a"]
    bob = ["--cookies", "oauth2_proxy_kubeflow=b0b", "--namespace", "team-b"]
    try:
        assert main(_verb("upload", api, dist, "--cookies", "oauth2_proxy_kubeflow=s3ss")) == 0
        assert main(_verb("schedule", api, dist, *alice, *WEEKLY, "--cron", "@weekly")) == 0
        assert main(_verb("schedule", api, dist, *bob, *WEEKLY, "--cron", "@weekly")) == 0
        assert [r["namespace"] for r in api.recurring] == ["team-a", "team-b"]  # one each
        capsys.readouterr()
        assert main(_verb("schedule", api, dist, *alice, "pause", "--name", "weekly")) == 0
        assert [r["status"] for r in api.recurring] == ["DISABLED", "ENABLED"]
        assert main(_verb("schedule", api, dist, *bob, "list")) == 0
        assert "ENABLED" in capsys.readouterr().out
        # alice in bob's namespace: the server's own refusal, one line
        ns_b = ["--cookies", "oauth2_proxy_kubeflow=s3ss", "--namespace", "team-b"]
        assert main(_verb("schedule", api, dist, *ns_b, "list")) == 2
        err = capsys.readouterr().err
        assert "HTTP 403: User 'alice@example.com' is not authorized" in err
        assert err.count("\n") == 1
    finally:
        api.close()
