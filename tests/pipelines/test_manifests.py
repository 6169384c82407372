"""The Kubernetes manifests agree with what the compiled pipelines expect (Secret names and keys,
the model-cache claim, the warm-up Job) and with what KFP's authorization checks; every overlay
with every model-cache component builds with `kubectl kustomize` and validates against the
Kubernetes schema (kubernetes-validate), as do the Job compile writes and doctor's probe pod."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autocomp.pipelines.cluster import resources, warmup

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
# what KFP's API server asks a SubjectAccessReview about (backend/src/apiserver/common/const.go
# at 2.15.0); pipeline versions are checked as `pipelines` with no subresource
# (server/pipeline_upload_server.go, pipeline_server.go)
KFP_RESOURCES = {"pipelines", "experiments", "runs", "jobs"}
KFP_VERBS = {"create", "get", "list", "update", "delete", "archive", "unarchive", "enable",
             "disable", "retry", "terminate", "reportMetrics", "readArtifact"}  # fmt: skip
OVERLAYS = sorted(p.name for p in (MANIFESTS / "overlays").iterdir())
COMPONENTS = sorted(p.name for p in (MANIFESTS / "components").iterdir())
KUBECTL = shutil.which("kubectl")


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((MANIFESTS / "base" / name).read_text()) if d]


def test_no_cronjob_recurring_runs_are_kfps_own():
    kinds = {d["kind"] for p in MANIFESTS.rglob("*.yaml") for d in yaml.safe_load_all(p.read_text())
             if d and "kind" in d}  # fmt: skip
    assert "CronJob" not in kinds


def test_rbac_names_only_what_kfp_authorizes():
    role = next(d for d in _docs("rbac.yaml") if d["kind"] == "Role")
    for rule in role["rules"]:
        assert rule["apiGroups"] == ["pipelines.kubeflow.org"]
        assert set(rule["resources"]) <= KFP_RESOURCES and set(rule["verbs"]) <= KFP_VERBS
    granted = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    for needed in [("pipelines", "create"), ("runs", "create"), ("jobs", "create"),
                   ("experiments", "create"), ("pipelines", "list")]:  # fmt: skip
        assert needed in granted


def test_the_submitter_token_is_projected_for_the_kfp_audience():
    (account,) = _docs("serviceaccount.yaml")
    assert account["automountServiceAccountToken"] is False  # its audience is the wrong one
    (job,) = [d for d in yaml.safe_load_all((MANIFESTS / "examples/submit-job.yaml").read_text())]
    pod = job["spec"]["template"]["spec"]
    (source,) = pod["volumes"][0]["projected"]["sources"]
    assert source["serviceAccountToken"]["audience"] == "pipelines.kubeflow.org"
    from autocomp.pipelines.cluster.client import PODDEFAULT_TOKEN

    mount = pod["containers"][0]["volumeMounts"][0]["mountPath"]
    assert f"{mount}/{source['serviceAccountToken']['path']}" == PODDEFAULT_TOKEN
    assert pod["serviceAccountName"] == account["metadata"]["name"]


def test_secret_templates_and_model_cache_match_the_pipelines():
    (s3,) = _docs("secret.template.yaml")
    assert s3["metadata"]["name"] == resources.SECRET
    assert set(s3["stringData"]) == set(resources.SECRET_KEYS)
    (hf,) = _docs("hf-secret.template.yaml")
    assert hf["metadata"]["name"] == resources.HF_SECRET
    assert set(hf["stringData"]) == set(resources.HF_SECRET_KEYS)
    assert set(hf["stringData"].values()) == {""}
    (pvc,) = _docs("model-cache.yaml")
    assert pvc["metadata"]["name"] == resources.MODEL_CACHE_PVC
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert "storageClassName" not in pvc["spec"]  # a component names the class of your cloud
    base = yaml.safe_load((MANIFESTS / "base" / "kustomization.yaml").read_text())
    assert "model-cache.yaml" in base["resources"]
    assert not {"hf-secret.template.yaml", "model-cache-warmup.yaml"} & set(base["resources"])


def test_the_warmup_job_is_the_one_compile_writes():
    assert (MANIFESTS / "base/model-cache-warmup.yaml").read_text() == warmup.render("autocomp-gpu")


def test_the_warmup_job_completes_in_a_mesh_and_fills_the_cache_where_the_steps_look():
    job = warmup.job_manifest("registry.example/autocomp-gpu:1", ("regcred",))
    assert "namespace" not in job["metadata"]  # kubectl -n <profile> create -f
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    assert template["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
    pod = template["spec"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == resources.MODEL_CACHE_PVC
    (prepare,) = pod["initContainers"]
    assert prepare["securityContext"]["runAsUser"] == 1000  # Pod Security restricted: no root
    assert "test -w" in prepare["command"][-1] and "exit 1" in prepare["command"][-1]
    (container,) = pod["containers"]
    assert container["image"] == prepare["image"] == "registry.example/autocomp-gpu:1"
    assert container["securityContext"]["runAsUser"] == 1000
    assert container["volumeMounts"][0]["mountPath"] == resources.MODEL_CACHE_PATH
    env = {e["name"]: e for e in container["env"]}
    assert env["HF_HUB_CACHE"]["value"] == resources.MODEL_CACHE_ENV["HF_HUB_CACHE"]
    assert container["command"] == ["autocomp", "prefetch", "--cache", env["HF_HUB_CACHE"]["value"]]
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": resources.HF_SECRET, "key": "token", "optional": True}  # fmt: skip


def test_the_warmup_prefetches_every_model_the_pipelines_load():
    from autocomp.config import PROFILES
    from autocomp.generation.registry import get_generation_model
    from autocomp.pipelines.cluster.plan import in_all
    from autocomp.scoring.registry import all_models

    wanted = {w.model: w for w in warmup.wanted()}
    everything, left_out = in_all()
    assert set(everything) | set(left_out) <= set(wanted)  # what evaluate_models may score
    registry = all_models()
    for name in everything:
        entry = registry[name]
        repo = entry.hf_hub if entry.backend == "open_clip" else entry.weights
        assert (wanted[name].repo, wanted[name].revision) == (repo, entry.revision)
    assert wanted["negclip"].repo is None and wanted["negclip"].by_hand.endswith("negclip.pth")
    paper = PROFILES["paper"]
    for role, name in paper.roles().items():
        weights = registry[name].weights if role == "vqa" else (
            get_generation_model(role, name).weights)  # fmt: skip
        assert wanted[name].repo == weights
    assert len(wanted) >= 30


def test_the_warmup_keeps_one_copy_of_each_model():
    diffusers = ["model_index.json", "sd3.5_large.safetensors", "transformer/config.json",
                 "transformer/diffusion_pytorch_model-00001-of-00002.safetensors",
                 "text_encoder/model.safetensors", "README.md"]  # fmt: skip
    assert warmup.choose_files(diffusers) == sorted(
        f for f in diffusers if f != "sd3.5_large.safetensors"
    )
    clip = ["open_clip_config.json", "open_clip_model.safetensors", "open_clip_pytorch_model.bin",
            "tokenizer.json", "flax_model.msgpack"]  # fmt: skip
    assert warmup.choose_files(clip) == ["open_clip_config.json", "open_clip_model.safetensors",
                                         "tokenizer.json"]  # fmt: skip
    only_pickles = ["config.json", "pytorch_model.bin"]
    assert warmup.choose_files(only_pickles) == only_pickles  # nothing better to keep


def test_a_component_per_cloud_gives_the_cache_a_class_that_can_be_shared():
    classes = {}
    for name in COMPONENTS:
        component = yaml.safe_load(
            (MANIFESTS / "components" / name / "kustomization.yaml").read_text()
        )
        assert component["kind"] == "Component"
        (patch,) = component["patches"]
        assert patch["target"] == {
            "kind": "PersistentVolumeClaim",
            "name": resources.MODEL_CACHE_PVC,
        }
        (op,) = yaml.safe_load(patch["patch"])
        classes[name] = op["value"]
    assert classes == {"model-cache-aks": "azurefile-csi", "model-cache-cephfs": "rook-cephfs",
                       "model-cache-eks": "efs-sc", "model-cache-gke": "standard-rwx",
                       "model-cache-nfs": "nfs-client", "model-cache-single-node": ["ReadWriteOnce"]}  # fmt: skip


def test_multi_user_overlay_moves_everything_to_a_profile_namespace():
    overlay = yaml.safe_load((MANIFESTS / "overlays/multi-user/kustomization.yaml").read_text())
    assert overlay["namespace"] != "kubeflow" and overlay["resources"] == ["../../base"]


@pytest.mark.infra
@pytest.mark.skipif(KUBECTL is None, reason="no kubectl (kustomize) here")
@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("component", [None, *COMPONENTS])
def test_every_overlay_builds_with_every_cache_component_and_validates(
    overlay, component, tmp_path
):
    kustomization = {"resources": [str(MANIFESTS / "overlays" / overlay)]}
    if component:
        kustomization["components"] = [str(MANIFESTS / "components" / component)]
    for key, paths in kustomization.items():  # kustomize wants paths relative to the file
        kustomization[key] = [os.path.relpath(p, tmp_path) for p in paths]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    built = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    docs = [d for d in yaml.safe_load_all(built.stdout) if d]
    (claim,) = [d for d in docs if d["kind"] == "PersistentVolumeClaim" and
                d["metadata"]["name"] == resources.MODEL_CACHE_PVC]  # fmt: skip
    assert {d["metadata"]["namespace"] for d in docs} == {claim["metadata"]["namespace"]}
    out = tmp_path / "built.yaml"
    out.write_text(built.stdout)
    _validate(out)


@pytest.mark.infra
def test_the_compiled_warmup_job_and_the_probe_pod_validate(tmp_path):
    from autocomp.pipelines.cluster.doctor import probe_pod

    (tmp_path / "job.yaml").write_text(warmup.render("r.example/autocomp-gpu:1", ("regcred",)))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(probe_pod("s3://b/p", "r/c:1", ["regcred"])))
    _validate(tmp_path / "job.yaml", tmp_path / "pod.yaml")


def _validate(*paths: Path) -> None:
    tool = Path(sys.executable).parent / "kubernetes-validate"
    done = subprocess.run([tool, "--strict", *map(str, paths)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
