"""A new generator in one command (issue 33): `autocomp schedule|submit --renderer NAME`
compiles the packages that renderer needs (beside --dist, with its options, when its GPUs must
be larger), uploads the package as a new version and runs it with `renderer=NAME`, against the
KFP stand-in; bad input is one line and nothing is sent."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from autocomp.cli.main import main
from autocomp.errors import UsageError
from autocomp.pipelines.cluster.packages import check_placement, compiled_gpu_floor
from tests.pipelines.kfp_standin import KfpStandIn

pytestmark = pytest.mark.slow


@pytest.fixture
def setup(dist_for, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    dist = tmp_path / "dist"
    shutil.copytree(dist_for(tolerations=("gpu=true:NoSchedule",)), dist)
    api = KfpStandIn()
    yield api, dist
    api.close()


def _render_floor(docs: list[dict]) -> int:
    executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    return compiled_gpu_floor(executors["exec-render"]) or 0


def _verb(api: KfpStandIn, dist, verb: str, *extra: str) -> int:
    name = ["--cron", "@weekly"] if verb == "schedule" else []
    return main([verb, "--host", api.host, "--dist", str(dist), "--pipeline", "generate_benchmark",
                 "--name", "weekly-gen", *name, "--param", "name=gen",
                 "--store-capacity", "10Ti", *extra])  # fmt: skip


def test_schedule_with_a_renderer_compiles_uploads_and_schedules_in_one_command(setup, capsys):
    api, dist = setup
    before = list(yaml.safe_load_all((dist / "generate_benchmark.yaml").open()))
    with pytest.raises(UsageError, match="recompile"):  # the user's dist/ cannot run flux-dev
        check_placement("generate_benchmark", {"renderer": "flux-dev"}, before)
    assert _verb(api, dist, "schedule", "--renderer", "flux-dev") == 0
    made = dist / "generators" / "flux-dev"
    err = capsys.readouterr().err
    assert f"compiling the packages for it into {made}" in err and "created" in err
    (swf,) = api.recurring
    assert swf["runtime_config"]["parameters"]["renderer"] == "flux-dev"
    version = swf["pipeline_version_reference"]["pipeline_version_id"]
    docs = api.packages[version]  # what the stand-in received in this same command
    assert docs == [d for d in yaml.safe_load_all((made / "generate_benchmark.yaml").open()) if d]
    assert _render_floor(docs) > _render_floor(before)
    check_placement("generate_benchmark", {"renderer": "flux-dev"}, docs)  # flux-dev fits now
    # the options dist/ was compiled with carry over (here: the GPU nodes' taint)
    options = json.loads((made / "compile.json").read_text())
    assert options["tolerations"] == ["gpu=true:NoSchedule"]
    assert options["gpu_sizes"] == {"render": 48}
    # another renderer the user's dist/ already holds: that package, as a new version, and the
    # schedule of the same name replaced (never two)
    assert _verb(api, dist, "schedule", "--renderer", "sd3.5-large-turbo") == 0
    assert not (dist / "generators" / "sd3.5-large-turbo").exists()
    (swf,) = api.recurring
    assert swf["runtime_config"]["parameters"]["renderer"] == "sd3.5-large-turbo"
    (pid,) = api.versions
    assert len(api.versions[pid]) == 2
    # submit reuses the compiled folder; the upload of unchanged content sends no new version
    assert _verb(api, dist, "submit", "--renderer", "flux-dev") == 0
    assert len(api.versions[pid]) == 2
    (run,) = api.runs
    assert run["pipeline_version_reference"]["pipeline_version_id"] == version
    assert run["runtime_config"]["parameters"]["renderer"] == "flux-dev"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--renderer", "no-such-model"], "unknown renderer"),
        (["--renderer", "flux-dev", "--param", "renderer=flux-dev"], "give the renderer once"),
    ],
)
def test_a_bad_renderer_is_one_line_and_nothing_is_sent(setup, capsys, extra, words):
    api, dist = setup
    assert _verb(api, dist, "submit", *extra) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1
    assert not api.requests and not (dist / "generators").exists()


def test_a_renderer_for_a_pipeline_that_renders_nothing_is_refused(setup, capsys):
    api, dist = setup
    argv = ["submit", "--host", api.host, "--dist", str(dist), "--pipeline", "evaluate_models",
            "--name", "e", "--param", "name=b", "--renderer", "flux-dev"]  # fmt: skip
    assert main(argv) == 2
    assert "renders nothing" in capsys.readouterr().err and not api.requests
