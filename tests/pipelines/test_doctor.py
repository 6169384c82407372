"""`autocomp doctor` against the KFP API stand-in, the Kubernetes API stand-in (which runs the
store probe pod for real, against moto's S3 server), a registry stand-in and a local store."""

from __future__ import annotations

import json
import os

import pytest

from autocomp.cli.main import main
from autocomp.pipelines.cluster.doctor import PROBE_PASSED, nodes_for, step_engines
from autocomp.pipelines.cluster.resources import GPU_CARDS, ScoreClass
from autocomp.pipelines.compile import PIPELINES
from tests.infra.test_storage import s3_server  # noqa: F401  (the moto_server fixture)
from tests.pipelines.kfp_standin import KfpStandIn
from tests.pipelines.kube_standin import KubeStandIn
from tests.pipelines.registry_standin import RegistryStandIn

DIGEST = "sha256:" + "cd" * 32
S3_KEYS = {"endpoint": "http://127.0.0.1:9", "access_key": "testing", "secret_key": "testing"}


@pytest.fixture(scope="module")
def registry():
    standin = RegistryStandIn()
    for kind in ("core", "gpu"):  # the caption image was never pushed
        standin.push(f"autocomp-{kind}", DIGEST)
    yield standin
    standin.close()


@pytest.fixture(scope="module")
def dists(registry, tmp_path_factory):
    """The packages compiled for three backends, their images at the registry stand-in."""
    from autocomp.pipelines.cluster import images
    from autocomp.pipelines.compile import compile_all

    lock = tmp_path_factory.mktemp("lock") / "lock.json"
    lock.write_text(json.dumps({k: {"image": images.tagged(k, registry.host, "v1"),
                                    "digest": DIGEST} for k in images.image_keys()}))  # fmt: skip
    saved = os.environ["AUTOCOMP_IMAGE_LOCK"]
    os.environ["AUTOCOMP_IMAGE_LOCK"] = str(lock)
    images.image_lock.cache_clear()
    try:
        out = {b: tmp_path_factory.mktemp(f"dist-{b}") for b in ("2.17.0", "2.14.3", "2.5.0")}
        for backend, folder in out.items():
            with pytest.warns(UserWarning, match="pins"):  # the lock is not this checkout's
                compile_all(folder, backend)
    finally:
        os.environ["AUTOCOMP_IMAGE_LOCK"] = saved
        images.image_lock.cache_clear()
    return out


@pytest.fixture
def no_kubeconfig(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))


def _doctor(host: str, dist, *extra: str) -> list[str]:
    return ["doctor", "--host", host, "--dist", str(dist), *extra]


@pytest.mark.slow
def test_doctor_passes_a_ready_installation(dists, tmp_path, no_kubeconfig, capsys):
    api = KfpStandIn(tag_name="2.17.0")
    try:
        assert main(["upload", "--host", api.host, "--dist", str(dists["2.17.0"])]) == 0
        capsys.readouterr()
        store = tmp_path / "store"
        with pytest.raises(SystemExit) as exit_:
            main(_doctor(api.host, dists["2.17.0"], "--store", str(store)))
    finally:
        api.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"PASS kfp: {api.host} answers, KFP 2.17.0 (healthz tag_name), single-user"
    k = len(PIPELINES)
    assert [line.split(":")[0] for line in lines[1 : 1 + 2 * k]] == [
        f"PASS {what} {name}" for name in PIPELINES for what in ("backend", "pipeline")
    ]
    assert (
        lines[1 + 2 * k].startswith("SKIP cluster: no kubeconfig")
        and "autocomp-hf" in (lines[1 + 2 * k])
    )
    assert lines[2 + 2 * k] == f"PASS store: {store} is reachable from this machine: {PROBE_PASSED}"
    images = [line for line in lines if line.split()[1] == "image"]
    # the three images the shipped registry's pipelines name (no class runs in a variant)
    assert sorted(line.split()[0] for line in images) == ["FAIL", "PASS", "PASS"]
    assert "autocomp-caption" in next(i for i in images if i.startswith("FAIL")) and (
        "push it" in "".join(images)
    )
    assert lines[-1] == "doctor: 1 check(s) failed" and exit_.value.code == 1  # that image
    assert (  # the engine of each model step, as `autocomp plan` names them
        "INFO engines generate_benchmark: caption vllm (image caption), render diffusers "
        "(image gpu), validate transformers (image gpu)"
    ) in lines


@pytest.mark.slow
@pytest.mark.parametrize(
    "tag, extra, expected",
    [
        ("2.2.0", [], "FAIL backend generate_benchmark: KFP 2.2.0: the launcher writes input "
         "artifacts under /minio"),
        ("2.5.0", [], "FAIL backend generate_benchmark: the package was compiled for KFP 2.15.0 "
         "and later, the server is 2.5.0; recompile: `autocomp compile --backend 2.5.0`"),
        ("unknown", [], "FAIL kfp: "),
        ("unknown", ["--kfp-version", "2.14.3"], "FAIL backend generate_benchmark: the package "
         "was compiled for KFP 2.15.0 and later, the server is 2.14.3"),
    ],
)  # fmt: skip
def test_doctor_refuses_a_backend_the_package_cannot_run_on(
    dists, no_kubeconfig, capsys, tag, extra, expected
):
    api = KfpStandIn(tag_name=tag)
    try:
        with pytest.raises(SystemExit) as exit_:
            main(_doctor(api.host, dists["2.17.0"], *extra))
    finally:
        api.close()
    out = capsys.readouterr().out
    assert exit_.value.code == 1 and expected in out, out
    if tag == "unknown" and not extra:
        assert "version is unknown" in out and "--kfp-version" in out
    assert out.count("is not uploaded there; run `autocomp upload`") == len(PIPELINES)


@pytest.mark.slow
def test_a_package_for_an_older_backend_says_what_runs_degraded(dists, no_kubeconfig, capsys):
    api = KfpStandIn(tag_name="2.5.0")
    try:
        with pytest.raises(SystemExit):
            main(_doctor(api.host, dists["2.5.0"]))
    finally:
        api.close()
    out = capsys.readouterr().out
    assert "dsl.Collected" not in out  # no fan-in through it: curate reads the store
    assert "only root-DAG tasks are retried" in out and "render, validate" in out


@pytest.mark.slow
def test_doctor_needs_the_namespace_in_multi_user_mode(dists, no_kubeconfig, capsys):
    api = KfpStandIn(multi_user=True, users={"s3ss10n": "alice@example.com"})
    try:
        with pytest.raises(SystemExit):
            main(_doctor(api.host, dists["2.17.0"], "--cookies", "oauth2_proxy_kubeflow=s3ss10n"))
    finally:
        api.close()
    assert "FAIL kfp: " in (out := capsys.readouterr().out) and "profile namespace" in out


@pytest.mark.slow
def test_doctor_says_when_nothing_answers(dists, no_kubeconfig, capsys):
    with pytest.raises(SystemExit):
        main(_doctor("http://127.0.0.1:9", dists["2.17.0"]))
    assert capsys.readouterr().out.startswith("FAIL kfp: http://127.0.0.1:9: no KFP API answers")


def _cluster(
    kube: KubeStandIn, hf: bool = True, claim: tuple = ("Bound", "efs", "efs.csi.aws.com")
):
    kube.add_secret("team", "autocomp-s3", S3_KEYS)
    if hf:
        kube.add_secret("team", "autocomp-hf", {"token": ""})
    phase, klass, provisioner = claim
    kube.add_class(
        klass, provisioner, "WaitForFirstConsumer" if klass == "standard-rwx" else "Immediate"
    )
    kube.add_claim("team", "autocomp-model-cache", phase, klass, ["ReadWriteMany"])
    kube.add_node("cpu-1", 0, {})
    kube.add_node("t4", 1, {"nvidia.com/gpu.memory": "15360"})
    kube.add_node("a100", 1, {"nvidia.com/gpu.memory": "40960"})
    kube.add_node(
        "h100x4",
        4,
        {"nvidia.com/gpu.memory": "81559"},
        taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    )


def _check_cluster(dist, kube, monkeypatch, tmp_path, models, store=None) -> list[str]:
    from autocomp.pipelines.cluster.doctor import Report, check_cluster, load_packages

    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig(tmp_path / "config")))
    monkeypatch.setenv("HOME", str(tmp_path))
    report = Report()
    check_cluster(report, "team", load_packages(report, dist), models, store)
    return report


@pytest.mark.slow
@pytest.mark.infra
def test_doctor_checks_the_namespace_nodes_and_store_through_the_kube_api(
    dists,
    s3_server,  # noqa: F811
    monkeypatch,
    tmp_path,
    capsys,
):
    kube = KubeStandIn()
    try:
        _cluster(kube)
        kube.add_secret(
            "team", "autocomp-s3", {**S3_KEYS, "endpoint": f"http://127.0.0.1:{s3_server}"}
        )
        report = _check_cluster(dists["2.17.0"], kube, monkeypatch, tmp_path,
                                ["clip-vit-b-16", "qwen2.5-vl-72b"], "s3://autocomp/runs")  # fmt: skip
    finally:
        kube.close()
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "PASS secret autocomp-s3: present",
        "PASS secret autocomp-hf: present",
        "PASS pvc autocomp-model-cache: Bound, class efs (efs.csi.aws.com), ReadWriteMany, 1Ti",
    ]
    gpus = {line.split(": ")[0]: line for line in out if line.split()[1] == "gpu"}
    # caption/render/validate (40 GB GPUs) and the fine-tuning steps: the A100 and the H100 node
    assert gpus["PASS gpu 1x (nvidia.com/gpu.memory >= 38146)"].endswith("on a100, h100x4")
    assert gpus["PASS gpu 1x (nvidia.com/gpu.memory >= 15258)"].endswith("on t4, a100, h100x4")
    assert "PASS gpu 2x (nvidia.com/gpu.memory >= 76293)" in gpus  # qwen2.5-vl-72b
    assert not any("4x" in key for key in gpus)  # no requested model needs 4 GPUs
    store = next(line for line in out if line.split()[1] == "store:")
    assert store == ("PASS store: s3://autocomp/runs is reachable from a pod in team with the "
                     f"steps' Secret autocomp-s3 and image: {PROBE_PASSED}")  # fmt: skip
    (pod,) = kube.created
    (container,) = pod["spec"]["containers"]
    assert container["image"].split("/")[-1] == f"autocomp-core:v1@{DIGEST}"
    assert {e["name"] for e in container["env"]} >= {"AWS_ACCESS_KEY_ID", "AUTOCOMP_S3_ENDPOINT"}
    assert pod["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert report.failed == 1  # the caption image is not in the registry


@pytest.mark.slow
def test_doctor_names_what_an_older_backend_or_another_cloud_needs(
    dists, monkeypatch, tmp_path, capsys
):
    kube = KubeStandIn(pullable=set())
    try:
        _cluster(kube, hf=False, claim=("Pending", "gp3", "ebs.csi.aws.com"))
        _check_cluster(dists["2.5.0"], kube, monkeypatch, tmp_path, ["clip-vit-b-16"],
                       "s3://autocomp/runs")  # fmt: skip
    finally:
        kube.close()
    out = capsys.readouterr().out
    # 2.5 drops `optional`: the HF Secret must exist
    assert (
        "FAIL secret autocomp-hf: not readable in team (Not Found) (the package's backend " in out
    )
    assert "FAIL pvc autocomp-model-cache: Pending, class gp3 (ebs.csi.aws.com)" in out
    assert "cannot be ReadWriteMany" in out
    # no affinity before 2.14: node selectors on autocomp's size labels, with the commands
    assert "FAIL gpu 1x (autocomp.io/gpu-40gb)" in out
    assert ("kubectl label node a100 autocomp.io/gpu-16gb=true autocomp.io/gpu-24gb=true "
            "autocomp.io/gpu-40gb=true") in out  # fmt: skip
    assert "kubectl label node t4 autocomp.io/gpu-16gb=true" in out
    assert (
        "FAIL store: s3://autocomp/runs failed from a pod in team" in out and "ErrImagePull" in out
    )


@pytest.mark.slow
def test_a_store_secret_without_a_key_fails_the_probe_as_the_steps_would(
    dists, monkeypatch, tmp_path, capsys
):
    kube = KubeStandIn()
    try:
        _cluster(kube, claim=("Pending", "standard-rwx", "filestore.csi.storage.gke.io"))
        kube.add_secret("team", "autocomp-s3", {"endpoint": "http://x", "access_key": "a"})
        _check_cluster(dists["2.17.0"], kube, monkeypatch, tmp_path, ["clip-vit-b-16"],
                       "s3://autocomp/runs")  # fmt: skip
    finally:
        kube.close()
    out = capsys.readouterr().out
    assert "FAIL secret autocomp-s3: missing keys ['secret_key']" in out
    assert "WARN pvc autocomp-model-cache: Pending" in out and "warm-up Job" in out
    assert "CreateContainerConfigError" in out


def test_taints_the_steps_do_not_tolerate_are_named_with_the_fix():
    from autocomp.pipelines.cluster.doctor import fitting

    place = {"gpus": 1, "floor": 15258, "labels": {}, "disk": 120 * 2**30,
             "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}  # fmt: skip
    node = {"name": "aks-gpu", "gpus": 1, "labels": {"nvidia.com/gpu.memory": "15360"},
            "ephemeral": "200Gi", "taints": [{"key": "sku", "value": "gpu", "effect": "NoSchedule"}]}  # fmt: skip
    assert (
        fitting(place, node) == "taint sku=gpu:NoSchedule (compile --toleration sku=gpu:NoSchedule)"
    )
    node["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoExecute"}]
    assert fitting(place, node) is None  # an effect-less toleration tolerates every effect
    node["ephemeral"] = "100Gi"
    assert fitting(place, node) == "100Gi of local disk < the /scratch limit"


def test_gpu_classes_are_matched_to_nodes_by_gpu_count_and_the_real_memory_labels():
    nodes = [{"name": card, "gpus": 1, "labels": {"nvidia.com/gpu.memory": str(mib)}}
             for card, (_, mib) in GPU_CARDS.items()]  # fmt: skip
    fits = nodes_for([ScoreClass(1, 16), ScoreClass(1, 40), ScoreClass(1, 48)], nodes)
    assert fits["1x16gb"] == list(GPU_CARDS)  # a T4 holds CLIP ViT-B/16
    assert "NVIDIA-L40S" in fits["1x48gb"] and "NVIDIA-A100-SXM4-40GB" not in fits["1x48gb"]
    assert "NVIDIA-L4" not in fits["1x40gb"]


def test_doctor_names_the_engine_of_each_model_step():
    """The caption step's engine is the compiled package's own `caption_engine` default (a
    package compiled for transformers says so); the others are the plan's."""
    image = "r.test/autocomp-{}:v1@" + DIGEST
    docs = [{
        "root": {"inputDefinitions": {"parameters": {"caption_engine": {"defaultValue": "vllm"}}}},
        "deploymentSpec": {"executors": {
            "exec-caption": {"container": {"image": image.format("caption")}},
            "exec-render": {"container": {"image": image.format("gpu")}},
            "exec-sample": {"container": {"image": image.format("core")}},
            "exec-score-1x16gb-2": {"container": {"image": image.format("gpu")}},
            "exec-score-cpu-vllm": {"container": {"image": image.format("caption").replace(
                ":v1@", ":v1-cpu@")}},
        }},
    }]  # fmt: skip
    engines = {"caption": "transformers", "render": "diffusers", "score-1x16gb": "open_clip",
               "score-cpu-vllm": "vllm"}  # fmt: skip
    assert step_engines(docs, engines) == [
        "caption vllm (image caption)", "render diffusers (image gpu)",
        "score-1x16gb open_clip (image gpu)", "score-cpu-vllm vllm (image caption-cpu)",
    ]  # fmt: skip
    docs[0]["root"]["inputDefinitions"]["parameters"]["caption_engine"]["defaultValue"] = (
        "transformers"
    )
    assert step_engines(docs, engines)[0] == "caption transformers (image caption)"
