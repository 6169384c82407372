"""The Kubernetes manifests agree with what the compiled pipelines expect (Secret names and keys,
the model-cache claim) and with what KFP's authorization checks (tests/infra validates them
against the Kubernetes schema)."""

from __future__ import annotations

from pathlib import Path

import yaml

from autocomp.pipelines.cluster import resources

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
# what KFP's API server asks a SubjectAccessReview about (backend/src/apiserver/common/const.go)
KFP_RESOURCES = {"pipelines", "pipelines/versions", "experiments", "runs", "jobs"}
KFP_VERBS = {"create", "get", "list", "update", "delete", "archive", "unarchive", "enable",
             "disable", "retry", "terminate", "reportMetrics", "readArtifact"}  # fmt: skip


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
    base = yaml.safe_load((MANIFESTS / "base" / "kustomization.yaml").read_text())
    assert "model-cache.yaml" in base["resources"]
    assert not {"hf-secret.template.yaml", "model-cache-warmup.yaml"} & set(base["resources"])


def test_the_warmup_job_fills_the_cache_where_the_steps_look():
    (job,) = _docs("model-cache-warmup.yaml")
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == resources.MODEL_CACHE_PVC
    assert container["volumeMounts"][0]["mountPath"] == resources.MODEL_CACHE_PATH
    env = {e["name"]: e for e in container["env"]}
    assert env["HF_HUB_CACHE"]["value"] == resources.MODEL_CACHE_ENV["HF_HUB_CACHE"]
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": resources.HF_SECRET,
                                                           "key": "token"}  # fmt: skip
    from autocomp.config import PROFILES
    from autocomp.generation.registry import get_generation_model

    paper = PROFILES["paper"]
    wanted = {get_generation_model("captioner", paper.caption.captioner).weights,
              get_generation_model("renderer", paper.render.renderer).weights}  # fmt: skip
    assert wanted <= set(env["MODELS"]["value"].split())


def test_multi_user_overlay_moves_everything_to_a_profile_namespace():
    overlay = yaml.safe_load((MANIFESTS / "overlays/multi-user/kustomization.yaml").read_text())
    assert overlay["namespace"] != "kubeflow" and overlay["resources"] == ["../../base"]
