"""The compiled pipelines (what the cluster receives) and the KFP client verbs against a local
HTTP stand-in of the KFP v2beta1 API."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import yaml

from autocomp import __version__
from autocomp.cli.main import main

SECRET_MARKER = "s3cr3t-value-that-must-not-leak"

pytestmark = pytest.mark.slow


def _docs(path: Path) -> tuple[dict, dict]:
    docs = list(yaml.safe_load_all(path.read_text()))
    spec = docs[0]
    platform = (
        docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"] if len(docs) > 1 else {}
    )
    return spec, platform


def _executor(spec: dict, task_name: str, dag: dict | None = None) -> str:
    """The executor label of a task (searched through the root DAG and its sub-DAGs)."""
    components = spec["components"]
    for dag_tasks in [
        spec["root"]["dag"]["tasks"],
        *(c["dag"]["tasks"] for c in components.values() if "dag" in c),
    ]:
        if task_name in dag_tasks:
            return components[dag_tasks[task_name]["componentRef"]["name"]]["executorLabel"]
    raise KeyError(task_name)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    import os

    os.environ["AWS_SECRET_ACCESS_KEY"] = SECRET_MARKER
    os.environ["AWS_ACCESS_KEY_ID"] = SECRET_MARKER
    try:
        out = tmp_path_factory.mktemp("dist")
        assert main(["compile", "--out", str(out)]) == 0
    finally:
        del os.environ["AWS_SECRET_ACCESS_KEY"], os.environ["AWS_ACCESS_KEY_ID"]
    return out


def test_gpu_steps_request_gpus_with_placement_and_retries(compiled):
    spec, platform = _docs(compiled / "generate_benchmark.yaml")
    executors = spec["deploymentSpec"]["executors"]
    for step in ("caption", "render", "validate"):
        label = _executor(spec, step)
        resources = executors[label]["container"]["resources"]
        assert resources["accelerator"]["resourceType"] == "nvidia.com/gpu"
        assert int(resources["accelerator"]["resourceCount"]) == 1
        assert resources["memoryLimit"] == 64.0 or resources.get("resourceMemoryLimit") == "64G"
        assert platform[label]["tolerations"][0]["key"] == "nvidia.com/gpu"
        assert platform[label]["nodeSelector"]["labels"] == {"nvidia.com/gpu.present": "true"}
    tasks = {**spec["root"]["dag"]["tasks"],
             **next(c["dag"]["tasks"] for c in spec["components"].values()
                    if "dag" in c and "render" in c["dag"]["tasks"])}  # fmt: skip
    assert tasks["render"]["retryPolicy"]["maxRetryCount"] == 3
    assert tasks["render"]["retryPolicy"]["backoffFactor"] == 2.0
    assert tasks["sample"]["cachingOptions"]["enableCache"] is True
    assert not tasks["publish"]["cachingOptions"].get("enableCache", False)
    assert "accelerator" not in executors[_executor(spec, "curate")]["container"]["resources"]


def test_store_steps_get_credentials_from_the_secret_only(compiled):
    for name, steps in (
        ("generate_benchmark", ["publish"]),
        ("evaluate_models", ["fetch", "report"]),
    ):
        text = (compiled / f"{name}.yaml").read_text()
        assert SECRET_MARKER not in text  # no credential value is ever compiled in
        spec, platform = _docs(compiled / f"{name}.yaml")
        for step in steps:
            wiring = platform[_executor(spec, step)]["secretAsEnv"][0]
            assert wiring["secretName"] == "autocomp-s3"
            assert {m["envVar"] for m in wiring["keyToEnv"]} == {
                "AUTOCOMP_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
            }  # fmt: skip


def test_images_carry_the_package_version(compiled):
    from autocomp.pipelines.components import image, image_tag

    spec, _ = _docs(compiled / "generate_benchmark.yaml")
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert image_tag().startswith(__version__)  # + commit; the lock's digests: tests/infra
    assert images == {image(k) for k in ("core", "caption", "gpu")}


def test_evaluation_fans_out_per_gpu_count(compiled):
    from autocomp.scoring.registry import gpu_groups

    spec, _ = _docs(compiled / "evaluate_models.yaml")
    executors = spec["deploymentSpec"]["executors"]
    counts = {}
    for component in spec["components"].values():
        for task in component.get("dag", {}).get("tasks", {}).values():
            if task["componentRef"]["name"].startswith("comp-score"):
                label = spec["components"][task["componentRef"]["name"]]["executorLabel"]
                accel = executors[label]["container"]["resources"].get("accelerator")
                counts[label] = int(accel["resourceCount"]) if accel else 0
    assert sorted(counts.values()) == gpu_groups() == [0, 1, 2, 4]


def test_a_new_model_in_the_registry_needs_no_pipeline_change(tmp_path, monkeypatch):
    from autocomp.scoring.registry import REGISTRY_FILE

    text = REGISTRY_FILE.read_text() + (
        "- {name: giant-vlm, title: Giant, backend: transformers_vlm, score: loglik,"
        " model_class: Qwen2_5_VLForConditionalGeneration, weights: org/giant, dtype: bfloat16,"
        " gpus: 8, gpu_memory_gb: 600, trust_remote_code: false}\n"
    )
    (tmp_path / "registry.yaml").write_text(text)
    monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", str(tmp_path / "registry.yaml"))
    import autocomp.pipelines.evaluate_models as module

    try:
        importlib.reload(module)
        from kfp import compiler

        compiler.Compiler().compile(module.evaluate_models, str(tmp_path / "e.yaml"))
        assert "score-8-gpu" in (tmp_path / "e.yaml").read_text()
        assert "resourceCount: '8'" in (tmp_path / "e.yaml").read_text()
    finally:
        monkeypatch.delenv("AUTOCOMP_MODEL_REGISTRY")
        importlib.reload(module)


# ----------------------------------------------------------------------------- KFP API


@pytest.fixture
def kfp_api():
    from tests.pipelines.kfp_standin import KfpStandIn

    standin = KfpStandIn()
    yield standin
    standin.close()


def test_upload_creates_then_versions_by_content(compiled, kfp_api, tmp_path, capsys):
    dist = str(compiled)
    assert main(["upload", "--host", kfp_api.host, "--dist", dist]) == 0
    assert "generate_benchmark: created" in capsys.readouterr().out
    uploads = [r for r in kfp_api.requests if r["path"].endswith("/pipelines/upload")]
    assert [r["query"]["name"] for r in uploads] == [
        ["autocomp-generate-benchmark"], ["autocomp-evaluate-models"],
        ["autocomp-finetune-models"],
    ]  # fmt: skip
    sent = yaml.safe_load_all(uploads[0]["files"]["uploadfile"])
    assert next(sent)["pipelineInfo"]["name"] == "autocomp-generate-benchmark"
    assert main(["upload", "--host", kfp_api.host, "--dist", dist]) == 0  # unchanged: no-op
    assert capsys.readouterr().out.count("unchanged") == 3
    assert not any(r["path"].endswith("upload_version") for r in kfp_api.requests)
    changed = tmp_path / "dist"
    changed.mkdir()
    for f in compiled.glob("*.yaml"):
        (changed / f.name).write_text(f.read_text() + "# changed\n")
    assert main(["upload", "--host", kfp_api.host, "--dist", str(changed),
                 "--pipeline", "evaluate_models"]) == 0  # fmt: skip
    versions = [r for r in kfp_api.requests if r["path"].endswith("upload_version")]
    assert len(versions) == 1 and versions[0]["query"]["name"][0].startswith(f"{__version__}-")


def test_schedule_sends_a_recurring_run_of_the_latest_version(compiled, kfp_api, capsys):
    main(["upload", "--host", kfp_api.host, "--dist", str(compiled)])
    argv = ["schedule", "--host", kfp_api.host, "--pipeline", "generate_benchmark",
            "--name", "weekly-flux", "--cron", "0 0 3 * * 1", "--max-concurrency", "2",
            "--param", "name=flux-weekly", "--param", "renderer=flux-dev",
            "--param", "reuse_concepts=paper-run", "--param", "count=500"]  # fmt: skip
    assert main(argv) == 0
    (job,) = kfp_api.recurring
    assert job["display_name"] == "weekly-flux"
    assert job["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * 1"
    assert int(job["max_concurrency"]) == 2 and job["mode"] == "ENABLE"
    assert job["runtime_config"]["parameters"] == {
        "name": "flux-weekly", "renderer": "flux-dev", "reuse_concepts": "paper-run", "count": 500,
    }  # fmt: skip
    pipeline_id = next(iter(kfp_api.pipelines))
    assert job["pipeline_version_reference"] == {
        "pipeline_id": pipeline_id,
        "pipeline_version_id": kfp_api.versions[pipeline_id][-1]["pipeline_version_id"],
    }
    assert job["experiment_id"] in kfp_api.experiments
    assert main(["submit", "--host", kfp_api.host, "--pipeline", "evaluate_models",
                 "--name", "eval", "--param", "name=flux-weekly"]) == 0  # fmt: skip
    assert kfp_api.runs[0]["runtime_config"]["parameters"] == {"name": "flux-weekly"}


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["schedule", "--pipeline", "generate_benchmark", "--name", "x", "--cron", "0 3 * * 1"],
            "6 fields",
        ),
        (
            ["submit", "--pipeline", "evaluate_models", "--name", "x", "--param", "oops"],
            "name=value",
        ),
        (["submit", "--pipeline", "evaluate_models", "--name", "x"], "not uploaded"),
    ],
)
def test_client_verbs_reject_bad_input(kfp_api, argv, message, capsys):
    assert main([*argv, "--host", kfp_api.host]) == 2
    assert message in capsys.readouterr().err


def test_upload_needs_a_compiled_pipeline(kfp_api, tmp_path, capsys):
    assert main(["upload", "--host", kfp_api.host, "--dist", str(tmp_path)]) == 2
    assert "autocomp compile" in capsys.readouterr().err
