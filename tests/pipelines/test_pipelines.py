"""The compiled pipelines (what the cluster receives) and the KFP client verbs against a local
HTTP stand-in of the KFP v2beta1 API."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from autocomp import __version__
from autocomp.cli.main import main
from autocomp.pipelines.compile import PIPELINES

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
    """The pipelines as `autocomp compile` writes them, in a process of its own as a user runs it
    (kfp's compiler keeps state between pipelines built in one process), with credentials in the
    environment that must never reach the YAML."""
    import os
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "AWS_SECRET_ACCESS_KEY": SECRET_MARKER, "AWS_ACCESS_KEY_ID": SECRET_MARKER}
    done = subprocess.run(
        [sys.executable, "-m", "autocomp.cli.main", "compile", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_gpu_steps_request_gpus_with_placement_and_retries(compiled):
    spec, platform = _docs(compiled / "generate_benchmark.yaml")
    executors = spec["deploymentSpec"]["executors"]
    for step in ("caption", "render", "validate"):
        label = _executor(spec, step)
        resources = executors[label]["container"]["resources"]
        assert resources["accelerator"]["resourceType"] == "nvidia.com/gpu"
        assert int(resources["accelerator"]["resourceCount"]) == 1
        assert resources["memoryLimit"] >= 64.0  # GB: the floor, raised by the capacity plan
        assert platform[label]["tolerations"][0]["key"] == "nvidia.com/gpu"
        assert "nodeSelector" not in platform[label]  # the GPU request places it, on any cloud
    tasks = {**spec["root"]["dag"]["tasks"],
             **next(c["dag"]["tasks"] for c in spec["components"].values()
                    if "dag" in c and "render" in c["dag"]["tasks"])}  # fmt: skip
    assert tasks["render"]["retryPolicy"]["maxRetryCount"] == 3
    assert tasks["render"]["retryPolicy"]["backoffFactor"] == 2.0
    assert tasks["sample"]["cachingOptions"]["enableCache"] is True
    assert not tasks["publish"]["cachingOptions"].get("enableCache", False)
    assert "accelerator" not in executors[_executor(spec, "curate")]["container"]["resources"]


def test_images_carry_the_package_version(compiled):
    from autocomp.pipelines.cluster.images import image, image_tag

    spec, _ = _docs(compiled / "generate_benchmark.yaml")
    images = {e["container"]["image"] for e in spec["deploymentSpec"]["executors"].values()}
    assert image_tag().startswith(__version__)  # + commit; the lock's digests: tests/infra
    assert images == {image(k) for k in ("core", "caption", "gpu")}


def _secrets(platform: dict, label: str) -> dict[str, set[str]]:
    return {
        w["secretName"]: {m["envVar"] for m in w["keyToEnv"]}
        for w in platform.get(label, {}).get("secretAsEnv", [])
    }


def _labels(spec: dict, prefix: str) -> list[str]:
    return [label for label in spec["deploymentSpec"]["executors"] if label.startswith(prefix)]


S3_ENV = {"AUTOCOMP_S3_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}


def test_every_task_that_touches_the_store_or_the_hub_gets_its_secret(compiled):
    store_steps = {"generate_benchmark": ["sample", "render", "validate", "curate", "negatives",
                                          "publish"],
                   "evaluate_models": ["report", "score", "collect-scores"]}  # fmt: skip
    hub_steps = {"generate_benchmark": ["caption", "render", "validate"],
                 "evaluate_models": ["score"]}  # fmt: skip
    for name in store_steps:
        text = (compiled / f"{name}.yaml").read_text()
        assert SECRET_MARKER not in text  # no credential value is ever compiled in
        spec, platform = _docs(compiled / f"{name}.yaml")
        for step in store_steps[name]:
            for label in _labels(spec, f"exec-{step}"):
                assert _secrets(platform, label)["autocomp-s3"] == S3_ENV, label
        for step in hub_steps[name]:
            for label in _labels(spec, f"exec-{step}"):
                assert _secrets(platform, label)["autocomp-hf"] == {"HF_TOKEN"}, label
                wiring = next(w for w in platform[label]["secretAsEnv"]
                              if w["secretName"] == "autocomp-hf")  # fmt: skip
                assert wiring["optional"] is True  # ungated models run without it
                (mount,) = platform[label]["pvcMount"]
                assert mount["mountPath"] == "/models"
                assert mount["pvcNameParameter"]["runtimeValue"]["constant"] == (
                    "autocomp-model-cache"
                )
                env = {e["name"]: e["value"] for e in
                       spec["deploymentSpec"]["executors"][label]["container"]["env"]}  # fmt: skip
                assert env["HF_HUB_CACHE"] == "/models/hub"
                assert env["AUTOCOMP_WEIGHTS_DIR"] == "/models/weights"
        for label in _labels(spec, "exec-"):  # no other step sees a credential
            step = re.sub(r"(-\d+|(-cpu|-\d+x\d+gb)(-vllm)?)$", "", label.removeprefix("exec-"))
            if step not in store_steps[name] + hub_steps[name]:
                assert not _secrets(platform, label), label


def test_steps_that_hold_data_or_weights_get_an_empty_dir_scratch_with_a_size_limit(compiled):
    """/scratch is an emptyDir (writable by the images' uid 1000; a provisioned volume's root
    is root's and KFP sets no fsGroup), limited to the step's disk; TMPDIR points there."""
    spec, platform = _docs(compiled / "generate_benchmark.yaml")
    from autocomp.pipelines.cluster.capacity import resources

    # render: room for the weights; publish streams store to store: the plan's few parts
    for step, size in (("render", "120Gi"), ("publish", resources("publish")["disk"])):
        label = _executor(spec, step)
        (volume,) = platform[label]["emptyDirMounts"]
        assert volume == {"mountPath": "/scratch", "sizeLimit": size, "volumeName": "scratch"}
        assert "genericEphemeralVolume" not in platform[label]
        env = {e["name"]: e["value"] for e in
               spec["deploymentSpec"]["executors"][label]["container"]["env"]}  # fmt: skip
        assert env["TMPDIR"] == "/scratch"
    assert int(volume["sizeLimit"].removesuffix("Gi")) < 10  # not the image set
    for step in ("shard-plan", "sample"):
        assert "emptyDirMounts" not in platform.get(_executor(spec, step), {})
    for name in PIPELINES:  # no step anywhere gets a generic ephemeral volume
        assert "genericEphemeralVolume" not in (compiled / f"{name}.yaml").read_text()


def _consumers(spec: dict, producer: str, output: str) -> set[str]:
    """Tasks (in any DAG) that take `output` of task `producer` (directly, or as the loop's
    fan-in, which the compiler names pipelinechannel--<producer>-<output>)."""
    found = set()
    channel = f"pipelinechannel--{producer}-{output}"
    dags = [spec["root"]["dag"], *(c["dag"] for c in spec["components"].values() if "dag" in c)]
    for dag in dags:
        for name, task in dag["tasks"].items():
            for given in task.get("inputs", {}).get("artifacts", {}).values():
                upstream = given.get("taskOutputArtifact", {})
                if (upstream.get("producerTask"), upstream.get("outputArtifactKey")) == (
                    producer,
                    output,
                ) or channel in (
                    upstream.get("outputArtifactKey"),
                    given.get("componentInputArtifact"),
                ):
                    found.add(name)
    return found


def test_large_data_moves_by_key_never_through_artifacts(compiled):
    """No task receives a render shard's images, the candidate table or the published
    benchmark as a KFP artifact, and no fan-in uses dsl.Collected (KFP 2.14+): the artifacts
    between the steps are tables and small manifests (location.json), the data is in the
    store."""
    for name in PIPELINES:
        spec, _ = _docs(compiled / f"{name}.yaml")
        assert "isArtifactList" not in (compiled / f"{name}.yaml").read_text(), name
        assert not {"comp-fetch", "comp-collect"} & set(spec["components"]), name
    spec, _ = _docs(compiled / "generate_benchmark.yaml")
    components = spec["components"]

    def artifacts(component: str, side: str) -> set[str]:
        return set(components[component].get(side, {}).get("artifacts", {}))

    assert artifacts("comp-render", "outputDefinitions") == {"table"}  # its table only
    assert artifacts("comp-validate", "inputDefinitions") == {"table", "work"}
    assert artifacts("comp-publish", "inputDefinitions") == {"benchmark", "work", "concepts",
                                                              "curated"}  # fmt: skip
    assert _consumers(spec, "render", "table") == {"validate"}
    curate = spec["root"]["dag"]["tasks"]["curate"]
    assert "for-loop-1" in curate["dependentTasks"]  # after every shard, gathered by key
    spec, _ = _docs(compiled / "evaluate_models.yaml")
    for name, component in spec["components"].items():
        if name.startswith("comp-score-"):
            assert "artifacts" not in component.get("inputDefinitions", {}), name


def _score_classes(spec: dict, platform: dict) -> dict[str, dict]:
    """Score sub-pipeline name -> its score executor's GPUs, node affinity, CPU, memory,
    whether it runs under a condition, and its loop's parallelism."""
    executors = spec["deploymentSpec"]["executors"]
    found = {}
    for cname, component in spec["components"].items():
        tasks = component.get("dag", {}).get("tasks", {})
        for task in tasks.values():
            if not task.get("triggerPolicy", {}).get("condition"):
                continue
            inner = spec["components"][task["componentRef"]["name"]]["dag"]["tasks"]
            loop = next(t for t in inner.values() if "parameterIterator" in t)
            body = spec["components"][loop["componentRef"]["name"]]["dag"]["tasks"]
            scoring = next(t for t in body.values() if t["taskInfo"]["name"].startswith("score"))
            label = spec["components"][scoring["componentRef"]["name"]]["executorLabel"]
            resources = executors[label]["container"]["resources"]
            accel = resources.get("accelerator")
            found["score-" + cname.removeprefix("comp-class-")] = {
                "condition": task["triggerPolicy"]["condition"],
                "gpus": int(accel["resourceCount"]) if accel else 0,
                "affinity": platform.get(label, {}).get("nodeAffinity"),
                "cpu": resources.get("resourceCpuLimit"),
                "memory": resources.get("resourceMemoryLimit"),
                "parallelism": loop["iteratorPolicy"]["parallelismLimit"],
                "image": executors[label]["container"]["image"],
            }
    return found


def test_each_score_class_is_a_sub_pipeline_that_schedules_nothing_when_empty(compiled):
    spec, platform = _docs(compiled / "evaluate_models.yaml")
    classes = _score_classes(spec, platform)
    # no -vllm class: the tiny vLLM entries stay in score-cpu (plan.score_groups)
    assert set(classes) == {"score-cpu", "score-1x16gb", "score-1x24gb", "score-1x40gb",
                            "score-2x80gb", "score-4x48gb", "score-4x80gb"}  # fmt: skip
    for name, c in classes.items():
        # an empty class skips its whole sub-DAG: no pod, no 4-GPU node to wait for
        assert c["condition"].endswith("> 0") and "count" in c["condition"], name
    big = classes["score-2x80gb"]  # qwen2.5-vl-72b: 160 GB on 2 GPUs of 80 GB
    from autocomp.pipelines.cluster.gpus import ScoreClass
    from autocomp.pipelines.cluster.pool import score_parallelism

    # every range pod of the class may run at once (the plan's ranges: 26 for qwen2.5-vl-72b)
    assert big["gpus"] == 2 and big["parallelism"] == score_parallelism(ScoreClass(2, 80)) > 1
    # 80 GB in MiB is 76293: an H100 (81559) and an A100-80GB (81920) qualify
    assert big["affinity"] == [{"matchExpressions": [
        {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["76292"]}]}]  # fmt: skip
    # host memory: the class's share of its GPU memory plus the streamed batches (the plan)
    assert big["cpu"] == "8" and big["memory"] == "121G"
    assert classes["score-1x16gb"]["memory"] == "17G"  # CLIP models
    assert classes["score-cpu"]["gpus"] == 0 and classes["score-cpu"]["affinity"] is None
    assert classes["score-1x16gb"]["parallelism"] == score_parallelism(ScoreClass(1, 16)) >= 8
    # the root DAG asks for no GPU: selecting, fetching and reporting run on CPU nodes
    executors = spec["deploymentSpec"]["executors"]
    for task in spec["root"]["dag"]["tasks"].values():
        component = spec["components"][task["componentRef"]["name"]]
        if "executorLabel" in component:
            resources = executors[component["executorLabel"]]["container"]["resources"]
            assert "accelerator" not in resources


def test_each_score_class_runs_in_the_image_of_its_engine(compiled):
    """The shipped registry's classes all run in the gpu image (its vLLM entries are tiny: they
    stay in their size's class); each class's collect step in the core image."""
    from autocomp.pipelines.cluster.images import image

    spec, platform = _docs(compiled / "evaluate_models.yaml")
    classes = _score_classes(spec, platform)
    assert {c["image"] for c in classes.values()} == {image("gpu")}
    # each class's collect step reads the store only: the core image, whatever the engine
    executors = spec["deploymentSpec"]["executors"]
    collects = [label for label in executors if label.startswith("exec-collect-scores")]
    assert collects and {executors[c]["container"]["image"] for c in collects} == {image("core")}


def test_vllm_entries_are_classes_of_their_own_in_the_caption_image(tmp_path):
    """A registry that adds a 4-GPU vLLM entry (80 GB GPUs) and a CPU one: `4x80gb-vllm` in the
    caption image, `cpu-vllm` in its CPU variant, each with its size's resources and
    placement."""
    import os
    import subprocess
    import sys

    from autocomp.pipelines.cluster.images import image
    from autocomp.scoring.registry import all_models

    models = all_models()
    big = {**models["qwen3.5-122b-a10b"].raw, "name": "big-vllm", "engine": "vllm"}
    small = {**models["tiny-qwen2.5-vl"].raw, "name": "small-vllm", "engine": "vllm",
             "weights": "Qwen/Qwen2.5-0.5B-Instruct", "model_class": "Qwen2ForCausalLM"}  # fmt: skip
    small.pop("tiny_config", None)
    extra = tmp_path / "registry.yaml"
    extra.write_text(yaml.safe_dump({"models": [big, small]}, sort_keys=False))
    out = tmp_path / "dist"
    env = {**os.environ, "AUTOCOMP_MODEL_REGISTRY": str(extra)}
    done = subprocess.run([sys.executable, "-m", "autocomp.cli.main", "compile", "--out", str(out)],
                          env=env, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    classes = _score_classes(*_docs(out / "evaluate_models.yaml"))
    assert {n for n in classes if n.endswith("-vllm")} == {"score-cpu-vllm", "score-4x80gb-vllm"}
    vllm, plain = classes["score-4x80gb-vllm"], classes["score-4x80gb"]
    assert vllm["image"] == image("caption") and plain["image"] == image("gpu")
    assert vllm["gpus"] == 4 and vllm["affinity"] == plain["affinity"] is not None
    assert (vllm["cpu"], vllm["memory"]) == (plain["cpu"], plain["memory"])
    cpu, plain = classes["score-cpu-vllm"], classes["score-cpu"]
    assert cpu["image"].split("@")[0].endswith("-cpu") and cpu["image"] == image("caption", "cpu")
    assert {k: v for k, v in cpu.items() if k != "image"} == {
        k: v for k, v in plain.items() if k != "image"}  # fmt: skip


def test_selection_is_decided_at_compile_time(compiled):
    """What each class holds and what "all" means come from the compiling machine's registry;
    `file:` weights (negclip) are named, not part of "all"; each class's score step receives
    only its own models' registry entries."""
    spec, _ = _docs(compiled / "evaluate_models.yaml")
    tasks = spec["root"]["dag"]["tasks"]
    selects = {t["inputs"]["parameters"]["members"]["runtimeValue"]["constant"][0]:
               t["inputs"]["parameters"] for t in tasks.values()
               if t["componentRef"]["name"].startswith("comp-select-models")}  # fmt: skip
    first = next(iter(selects.values()))
    everything = first["everything"]["runtimeValue"]["constant"]
    assert "negclip" not in everything and "qwen3.5-122b-a10b" in everything
    assert "negclip" in first["left_out"]["runtimeValue"]["constant"]
    assert not any(name.startswith("tiny-") for name in everything)
    text = (compiled / "evaluate_models.yaml").read_text()
    registries = [yaml.safe_load(v) for v in _constants(spec, "registry")]
    from autocomp.scoring.registry import all_models

    assert max(len(r["models"]) for r in registries) < len(all_models())  # per class only
    assert any([m["name"] for m in r["models"]] == ["qwen2.5-vl-72b"] for r in registries)
    assert "pipelinechannel--models" in text


def test_evaluate_models_fans_out_over_model_and_part_range(compiled):
    """Each class's loop runs over select_models' (model, range) items, K per model from the
    capacity plan at compile time; the score step gets the item, the class's collect step the
    score settings and registry it merges the ranges with; one flat loop (no nested
    ParallelFor, no dsl.Collected: every supported backend runs it)."""
    from autocomp.pipelines.cluster.pool import score_ranges
    from autocomp.pipelines.definitions.components.evaluation import select_models

    spec, _ = _docs(compiled / "evaluate_models.yaml")
    tasks = spec["root"]["dag"]["tasks"]
    selects = [t for t in tasks.values()
               if t["componentRef"]["name"].startswith("comp-select-models")]  # fmt: skip
    planned = selects[0]["inputs"]["parameters"]["planned"]["runtimeValue"]["constant"]
    assert planned == score_ranges(list(planned)) and planned["qwen2.5-vl-72b"] > 1
    assert planned["clip-vit-b-16"] == 1
    for select in selects:
        given = select["inputs"]["parameters"]["score_ranges"]
        assert given["componentInputParameter"] == "score_ranges"
    loops = 0
    for component in spec["components"].values():
        for task in component.get("dag", {}).get("tasks", {}).values():
            iterator = task.get("parameterIterator")
            if iterator is None:
                continue
            loops += 1
            assert iterator["items"]["inputParameter"] == "pipelinechannel--items"
            body = spec["components"][task["componentRef"]["name"]]["dag"]["tasks"]
            (scoring,) = body.values()
            given = scoring["inputs"]["parameters"]["model"]["componentInputParameter"]
            assert given == iterator["itemInput"]
            assert "parameterIterator" not in str(spec["components"][task["componentRef"]["name"]])
    from autocomp.pipelines.cluster.plan import score_groups

    assert loops == len(score_groups()) == 7  # one loop per score class
    collects = [t for c in spec["components"].values()
                for t in c.get("dag", {}).get("tasks", {}).values()
                if t["taskInfo"]["name"].startswith("collect")]  # fmt: skip
    assert collects and all({"registry", "max_candidates", "limit", "blind"}
                            <= set(t["inputs"]["parameters"]) for t in collects)  # fmt: skip
    assert "Collected" not in (compiled / "evaluate_models.yaml").read_text()
    choose = select_models.python_func
    chosen = choose(["a", "b"], ["a", "b"], ["a", "b"], ["a", "b"], {}, {"a": 3}, 0)
    assert chosen.items == ["a@1-of-3", "a@2-of-3", "a@3-of-3", "b"] and chosen.count == 2
    assert choose(["a"], ["a"], ["a"], ["a"], {}, {"a": 3}, 2).items == ["a@1-of-2", "a@2-of-2"]


def _constants(spec: dict, parameter: str) -> list:
    values = []
    for component in spec["components"].values():
        for task in component.get("dag", {}).get("tasks", {}).values():
            given = task.get("inputs", {}).get("parameters", {}).get(parameter, {})
            if "runtimeValue" in given:
                values.append(given["runtimeValue"]["constant"])
    return values


def test_report_publishes_html_and_metrics_and_no_pod_path(compiled):
    spec, _ = _docs(compiled / "evaluate_models.yaml")
    outputs = spec["components"]["comp-report"]["outputDefinitions"]
    kinds = {k: v["artifactType"]["schemaTitle"] for k, v in outputs["artifacts"].items()}
    assert kinds == {
        "page": "system.HTML",
        "accuracy": "system.Metrics",
        "tables": "system.Dataset",
    }
    assert "parameters" not in outputs  # no pod-local path as an output
    assert spec["root"]["outputDefinitions"]["artifacts"]["Output"]["artifactType"][
        "schemaTitle"] == "system.HTML"  # fmt: skip


def test_publish_name_is_unique_per_run(compiled):
    spec, _ = _docs(compiled / "generate_benchmark.yaml")
    publish = spec["root"]["dag"]["tasks"]["publish"]["inputs"]["parameters"]
    assert publish["run_id"]["runtimeValue"]["constant"] == "{{$.pipeline_job_uuid}}"
    assert publish["unique"]["componentInputParameter"] == "unique_name"
    assert spec["root"]["inputDefinitions"]["parameters"]["unique_name"]["defaultValue"] is True
    from autocomp.pipelines.cluster.plan import published_name

    run = "3f2a9c1e-0b7d-4c55-9e0f-1234567890ab"
    assert published_name("weekly", run, True) == "weekly-3f2a9c1e"
    assert published_name("weekly", run, False) == "weekly"


def test_a_new_model_in_the_registry_needs_no_pipeline_change(tmp_path, monkeypatch):
    text = "models:\n" + (  # AUTOCOMP_MODEL_REGISTRY adds to the shipped registry
        "- {name: giant-vlm, title: Giant, backend: transformers_vlm, score: loglik,"
        " model_class: Qwen2_5_VLForConditionalGeneration, weights: org/giant, dtype: bfloat16,"
        " gpus: 8, gpu_memory_gb: 600, trust_remote_code: false}\n"
    )
    (tmp_path / "registry.yaml").write_text(text)
    monkeypatch.setenv("AUTOCOMP_MODEL_REGISTRY", str(tmp_path / "registry.yaml"))
    from kfp import compiler

    from autocomp.pipelines.definitions import build

    compiler.Compiler().compile(build("evaluate_models"), str(tmp_path / "e.yaml"))
    text = (tmp_path / "e.yaml").read_text()
    assert "score-8x80gb" in text and "resourceCount: '8'" in text
    assert "giant-vlm" in text  # its entry travels with the pipeline, not in the image


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
        ["autocomp-finetune-models"], ["autocomp-generate-and-evaluate"],
    ]  # fmt: skip
    sent = yaml.safe_load_all(uploads[0]["files"]["uploadfile"])
    assert next(sent)["pipelineInfo"]["name"] == "autocomp-generate-benchmark"
    assert main(["upload", "--host", kfp_api.host, "--dist", dist]) == 0  # unchanged: no-op
    assert capsys.readouterr().out.count("unchanged") == 4
    assert not any(r["path"].endswith("upload_version") for r in kfp_api.requests)
    changed = tmp_path / "dist"
    changed.mkdir()
    for f in compiled.glob("*.yaml"):
        (changed / f.name).write_text(f.read_text() + "# changed\n")
    assert main(["upload", "--host", kfp_api.host, "--dist", str(changed),
                 "--pipeline", "evaluate_models"]) == 0  # fmt: skip
    versions = [r for r in kfp_api.requests if r["path"].endswith("upload_version")]
    assert len(versions) == 1 and versions[0]["query"]["name"][0].startswith(f"{__version__}-")


def test_schedule_sends_a_recurring_run_of_the_local_version(compiled, kfp_api, tmp_path):
    main(["upload", "--host", kfp_api.host, "--dist", str(compiled)])
    newer = tmp_path / "newer"  # a later upload must not change what the local dist/ runs
    newer.mkdir()
    for f in compiled.glob("*.yaml"):
        (newer / f.name).write_text(f.read_text() + "# newer\n")
    main(["upload", "--host", kfp_api.host, "--dist", str(newer)])
    argv = ["schedule", "--host", kfp_api.host, "--dist", str(compiled),
            "--pipeline", "generate_benchmark",
            "--name", "weekly-flux", "--cron", "0 0 3 * * 1", "--max-concurrency", "2",
            "--param", "name=2024", "--param", "renderer=sd3.5-large-turbo",
            "--param", "reuse_concepts=off", "--param", "count=500",
            "--param", "render_settings={guidance_scale: 3.5}",
            "--store-capacity", "10Ti"]  # fmt: skip
    assert main(argv) == 0
    (job,) = kfp_api.recurring
    assert job["display_name"] == "weekly-flux"
    assert job["trigger"]["cron_schedule"]["cron"] == "0 0 3 * * 1"
    assert int(job["max_concurrency"]) == 2 and job["mode"] == "ENABLE"
    assert job["no_catchup"] is True  # a paused schedule does not start a run per missed week
    assert job["runtime_config"]["parameters"] == {
        "name": "2024",
        "renderer": "sd3.5-large-turbo",
        "reuse_concepts": "off",
        "count": 500,
        "render_settings": {"guidance_scale": 3.5},
        "draw": "{{workflow.uid}}",  # each run draws anew: the run id, replaced per run
    }  # fmt: skip  (typed by inputDefinitions: "2024" and "off" stay strings)
    pipeline_id = next(iter(kfp_api.pipelines))
    first, second = kfp_api.versions[pipeline_id]
    assert job["pipeline_version_reference"] == {
        "pipeline_id": pipeline_id,
        "pipeline_version_id": first["pipeline_version_id"],  # the local one, not the newest
    }
    assert job["experiment_id"] in kfp_api.experiments
    assert main(["submit", "--host", kfp_api.host, "--dist", str(newer),
                 "--pipeline", "evaluate_models", "--name", "eval",
                 "--param", "name=flux-weekly"]) == 0  # fmt: skip
    (run,) = kfp_api.runs
    assert run["runtime_config"]["parameters"] == {"name": "flux-weekly"}
    evaluate_id = next(p for p in kfp_api.pipelines if p != pipeline_id)
    newest = kfp_api.versions[evaluate_id][-1]["pipeline_version_id"]
    assert run["pipeline_version_reference"]["pipeline_version_id"] == newest


def test_client_sends_the_bearer_token_from_the_named_variable(compiled, kfp_api, monkeypatch):
    monkeypatch.setenv("MY_KFP_TOKEN", "tok-123")
    assert main(["upload", "--host", kfp_api.host, "--dist", str(compiled),
                 "--token-env", "MY_KFP_TOKEN"]) == 0  # fmt: skip
    assert kfp_api.requests and all(
        r["headers"].get("authorization") == "Bearer tok-123" for r in kfp_api.requests
    )


@pytest.mark.parametrize(
    "param, message",
    [
        ("colour=red", "has no parameter colour; known:"),
        ("count=many", "count must be an integer"),
        ("count=1.5", "count must be an integer"),
        ("all_checks=off", "all_checks must be true or false"),
        ("render_settings=[1, 2]", "render_settings must be a mapping"),
        ("count", "must look like name=value"),
        # typed right, but refused by the library's checks (each stage's own rule)
        ("count=0", "error: count: 0: must be from 1 to"),
        ("seed=-1", "error: seed: -1: must be 0 or more"),
        ("num_shards=0", "error: num_shards: 0: must be at least 1"),
        ("specs=colour:2", "error: specs: 'colour:2'"),
        ("renderer=no-such-renderer", "unknown renderer"),
        ("caption_batch_size=0", "error: caption_batch_size: 0"),
        ("reuse_concepts=../../x", "reuse_concepts: '../../x': must be a name of letters, digits"),
    ],
)
def test_params_are_checked_against_the_package_before_any_request(
    compiled, kfp_api, param, message, capsys
):
    argv = ["submit", "--host", kfp_api.host, "--dist", str(compiled),
            "--pipeline", "generate_benchmark", "--name", "x", "--param", "name=n",
            "--param", param]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert kfp_api.requests == []  # refused before anything was sent


@pytest.mark.parametrize(
    "pipeline, params, message",
    [
        (
            "generate_benchmark",
            ["name=../../etc"],
            "name: '../../etc': must be a name of letters, digits",
        ),
        (
            "generate_benchmark",
            ["name=<b>x</b>"],
            "name: '<b>x</b>': must be a name of letters, digits",
        ),
        ("generate_benchmark", ["name="], "name: '': must be a name of letters, digits"),
        ("generate_benchmark", ["name=x", "store=ftp://h/x"], "store: 'ftp://h/x'"),
        ("evaluate_models", ["name=x", "models=[no-such-model]"], "unknown model"),
        ("evaluate_models", ["name=x", "limit=-5"], "error: limit: -5"),
        ("evaluate_models", ["name=x", "blind=maybe"], "error: blind: 'maybe'"),
        ("finetune_models", ["name=x", "steps=0"], "error: steps: 0"),
        ("finetune_models", ["name=x", "negatives=[both]"], "error: negatives: 'both'"),
    ],
)
@pytest.mark.parametrize("verb", ["submit", "schedule"])
def test_submit_and_schedule_refuse_what_the_local_run_refuses(
    compiled, kfp_api, verb, pipeline, params, message, capsys
):
    argv = [verb, "--host", kfp_api.host, "--dist", str(compiled), "--pipeline", pipeline,
            "--name", "x", *[a for p in params for a in ("--param", p)]]  # fmt: skip
    if verb == "schedule":
        argv += ["--cron", "0 0 3 * * 1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert kfp_api.requests == []  # no run id: nothing was sent


def test_the_python_api_checks_as_the_cli_does(compiled, kfp_api):
    from autocomp.errors import UsageError
    from autocomp.pipelines.cluster.client import connect, schedule, submit

    main(["upload", "--host", kfp_api.host, "--dist", str(compiled)])
    client = connect(kfp_api.host)
    package = compiled / "generate_benchmark.yaml"
    with pytest.raises(UsageError, match="^count: 0"):
        submit(client, "generate_benchmark", package, "x", {"name": "n", "count": 0})
    with pytest.raises(UsageError, match="^num_shards: 0"):
        schedule(client, "generate_benchmark", package, "x", "0 0 3 * * 1",
                 {"name": "n", "num_shards": 0})  # fmt: skip
    assert kfp_api.runs == [] and kfp_api.recurring == []


def test_a_required_parameter_must_be_given(compiled, kfp_api, capsys):
    argv = ["submit", "--host", kfp_api.host, "--dist", str(compiled),
            "--pipeline", "evaluate_models", "--name", "x"]  # fmt: skip
    assert main(argv) == 2
    assert "needs name=..." in capsys.readouterr().err and kfp_api.requests == []


def test_the_server_refuses_parameters_that_do_not_match_the_version(
    compiled, kfp_api, monkeypatch
):
    """What the real API answers when a client skips the local check (e.g. the UI or an old
    client): 400 INVALID_ARGUMENT; our client reports the server's message as a usage error."""
    import autocomp.pipelines.cluster.client as client_module
    from autocomp.errors import UsageError
    from autocomp.pipelines.cluster.client import connect, submit

    main(["upload", "--host", kfp_api.host, "--dist", str(compiled)])
    client = connect(kfp_api.host)
    package = compiled / "evaluate_models.yaml"
    monkeypatch.setattr(client_module, "check_params", lambda pipeline, params, spec: params)
    with pytest.raises(UsageError, match="HTTP 400: Invalid input error: unknown parameter"):
        submit(client, "evaluate_models", package, "x", {"name": "a", "colour": "red"})
    with pytest.raises(UsageError, match="parameter 'report_seed' expects NUMBER_INTEGER"):
        submit(client, "evaluate_models", package, "x", {"name": "a", "report_seed": "7"})
    with pytest.raises(UsageError, match="parameter 'name' is required"):
        submit(client, "evaluate_models", package, "x", {})
    assert kfp_api.runs == []


def test_schedule_refuses_a_name_that_is_not_run_unique(compiled, kfp_api, capsys):
    main(["upload", "--host", kfp_api.host, "--dist", str(compiled)])
    argv = ["schedule", "--host", kfp_api.host, "--dist", str(compiled),
            "--pipeline", "generate_benchmark", "--name", "w", "--cron", "0 0 3 * * 1",
            "--param", "name=w", "--param", "unique_name=false",
            "--store-capacity", "10Ti"]  # fmt: skip
    assert main(argv) == 2
    assert "run-unique" in capsys.readouterr().err and kfp_api.recurring == []


def test_submit_needs_the_local_version_uploaded(compiled, kfp_api, tmp_path, capsys):
    main(["upload", "--host", kfp_api.host, "--dist", str(compiled)])
    other = tmp_path / "other"
    other.mkdir()
    for f in compiled.glob("*.yaml"):
        (other / f.name).write_text(f.read_text() + "# not uploaded\n")
    argv = ["submit", "--host", kfp_api.host, "--dist", str(other),
            "--pipeline", "evaluate_models", "--name", "x", "--param", "name=a"]  # fmt: skip
    assert main(argv) == 2
    assert "is not uploaded there" in capsys.readouterr().err and kfp_api.runs == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["schedule", "--pipeline", "generate_benchmark", "--name", "x", "--cron", "0 3 * * 1",
             "--param", "name=x"],
            "6 fields",
        ),
        (["submit", "--pipeline", "evaluate_models", "--name", "x", "--param", "name=x"],
         "not uploaded"),
    ],
)  # fmt: skip
def test_client_verbs_reject_bad_input(compiled, kfp_api, argv, message, capsys):
    assert main([*argv, "--host", kfp_api.host, "--dist", str(compiled)]) == 2
    assert message in capsys.readouterr().err


def test_upload_needs_a_compiled_pipeline(kfp_api, tmp_path, capsys):
    assert main(["upload", "--host", kfp_api.host, "--dist", str(tmp_path)]) == 2
    assert "autocomp compile" in capsys.readouterr().err


def test_upload_checks_every_package_before_uploading_any(compiled, kfp_api, tmp_path, capsys):
    broken = tmp_path / "dist"
    broken.mkdir()
    (broken / "generate_benchmark.yaml").write_text(
        (compiled / "generate_benchmark.yaml").read_text()
    )
    (broken / "evaluate_models.yaml").write_text(
        (compiled / "generate_benchmark.yaml").read_text()  # the wrong pipeline under this name
    )
    assert main(["upload", "--host", kfp_api.host, "--dist", str(broken)]) == 2
    assert "is not the evaluate_models pipeline" in capsys.readouterr().err
    assert kfp_api.requests == [] and kfp_api.pipelines == {}


def test_an_endpoint_behind_authentication_needs_the_token(compiled, monkeypatch, capsys):
    from tests.pipelines.kfp_standin import KfpStandIn

    api = KfpStandIn(token="tok-9")
    try:
        assert main(["upload", "--host", api.host, "--dist", str(compiled)]) == 2
        err = capsys.readouterr().err
        assert "the KFP API refused access (HTTP 401: " in err and "Unauthenticated" in err
        assert "oauth2_proxy_kubeflow=" in err and "pipelines.kubeflow.org" in err
        assert api.pipelines == {}
        monkeypatch.setenv("KFP_TOKEN", "tok-9")
        assert main(["upload", "--host", api.host, "--dist", str(compiled)]) == 0
        assert len(api.pipelines) == len(PIPELINES)
    finally:
        api.close()


def test_compiled_yaml_does_not_depend_on_the_hash_seed(tmp_path):
    """Each score class's Kubernetes settings stay on its own executor whatever the process's
    hash seed (they once moved between classes with set order)."""
    import os
    import subprocess
    import sys

    texts = []
    for seed in ("1", "2", "3"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-m", "autocomp.cli.main", "compile", "--out", str(out)],
                       env=env, check=True, capture_output=True)  # fmt: skip
        texts.append((out / "evaluate_models.yaml").read_text())
    assert texts[0] == texts[1] == texts[2]
