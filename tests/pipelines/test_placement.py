"""GPU placement per platform (cluster.placement): each scheme's requirement, hand-checked
against real nodes' labels as each platform sets them; the compiled packages; doctor's scheme
check; submit's refusal of a class no node of the scheme can take. And what reaches the compiled
YAML checked against the cluster's grammar (cluster.validate)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autocomp.cli.main import main
from autocomp.errors import UsageError
from autocomp.pipelines.cluster import placement as p
from autocomp.pipelines.cluster import validate as v
from autocomp.pipelines.cluster.plan import score_groups
from autocomp.pipelines.cluster.resources import GPU_CARDS

# Nodes as each platform labels them (one GPU each unless said)
GKE_L4 = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
GKE_A100_40 = {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"}
GKE_H100 = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
KARPENTER_L4 = {"karpenter.k8s.aws/instance-gpu-name": "l4",
                "karpenter.k8s.aws/instance-gpu-memory": "22888"}  # fmt: skip
KARPENTER_A10G = {"karpenter.k8s.aws/instance-gpu-name": "a10g",
                  "karpenter.k8s.aws/instance-gpu-memory": "24576"}  # fmt: skip
EKS_G5 = {"node.kubernetes.io/instance-type": "g5.xlarge", "eks.amazonaws.com/nodegroup": "gpu"}
AKS_A100 = {"kubernetes.azure.com/accelerator": "nvidia",
            "node.kubernetes.io/instance-type": "Standard_NC24ads_A100_v4"}  # fmt: skip


def _fits(scheme: str, gpus: int, gb: int, labels: dict, affinity: bool = True) -> bool:
    found = p.place(scheme, gpus, gb, affinity)
    return found.placed and p.unmet(labels, found.selector, found.expressions) is None


@pytest.mark.parametrize("affinity", [True, False])
def test_each_provider_scheme_admits_the_cards_that_hold_a_class_and_no_smaller(affinity):
    assert _fits("gke", 1, 24, GKE_L4, affinity)
    assert not _fits("gke", 1, 40, GKE_L4, affinity)
    assert _fits("gke", 1, 40, GKE_A100_40, affinity)
    assert _fits("gke", 1, 80, GKE_H100) and not _fits("gke", 1, 80, GKE_A100_40)
    # node selectors only take one card: Karpenter's smallest 24 GB card is the A10G
    assert _fits("karpenter", 1, 24, KARPENTER_L4 if affinity else KARPENTER_A10G, affinity)
    assert not _fits("karpenter", 1, 40, KARPENTER_L4, affinity)
    assert _fits("eks", 1, 24, EKS_G5, affinity) and not _fits("eks", 1, 48, EKS_G5, affinity)
    assert _fits("aks", 1, 80, AKS_A100, affinity)
    assert not _fits("aks", 1, 80, {**AKS_A100, "kubernetes.azure.com/accelerator": "none"})


def test_with_affinity_every_card_that_holds_a_class_is_allowed_and_without_the_smallest():
    found = p.place("gke", 1, 40, True)
    assert found.expressions == [{"key": "cloud.google.com/gke-accelerator", "operator": "In",
                                  "values": ["nvidia-a100-80gb", "nvidia-b200",
                                             "nvidia-h100-80gb", "nvidia-h100-mega-80gb",
                                             "nvidia-h200-141gb", "nvidia-tesla-a100"]}]  # fmt: skip
    assert p.place("gke", 1, 40, False).selector == {
        "cloud.google.com/gke-accelerator": "nvidia-tesla-a100"
    }
    # a class of 4 GPUs only goes to instance types with 4 or more
    four = p.place("eks", 4, 24, True).expressions[0]["values"]
    assert "g5.12xlarge" in four and "g5.xlarge" not in four and "g6e.48xlarge" in four
    # Karpenter's memory label is MiB per GPU, as GFD's: the same floor
    assert p.place("karpenter", 1, 48, True).expressions[0]["values"] == ["45775"]
    assert p.place("karpenter", 1, 80, False).selector == {
        "karpenter.k8s.aws/instance-gpu-name": "a100",
        "karpenter.k8s.aws/instance-gpu-memory": "81920",
    }


def test_the_mib_tables_agree_with_what_gpu_feature_discovery_reports():
    by_mib = {mib for _, mib in GPU_CARDS.values()}
    for card in p.KARPENTER_CARDS:
        assert card.mib >= p.tier_floor_mib(card.gb), card  # every card holds its own size
    assert {23034, 46068, 40960, 81920, 81559} <= by_mib  # L4, L40S, A100 40/80, H100
    # EC2 (hence Karpenter's label) says less for the L4 than GFD's nvidia-smi number: 22888,
    # exactly the 24 GB floor, which the Gt requirement (floor - 1) still admits
    (l4,) = [c for c in p.KARPENTER_CARDS if c.value == "l4"]
    assert l4.mib == 22888 == p.tier_floor_mib(24)
    assert _fits("karpenter", 1, 24, KARPENTER_L4)


def test_every_registered_class_has_a_card_in_every_provider_scheme():
    for scheme in ("gke", "karpenter", "eks", "aks"):
        for klass in score_groups():
            if klass.gpus:
                assert p.place(scheme, klass.gpus, klass.gpu_gb, True).placed, (scheme, klass)


def test_explicit_labels_send_a_class_to_the_smallest_stated_size_that_holds_it():
    labels = ((24, "pool", "small"), (80, "pool", "big"))
    assert p.place("labels", 1, 16, True, labels).selector == {"pool": "small"}
    assert p.place("labels", 2, 40, True, labels).selector == {"pool": "big"}
    assert not p.place("labels", 1, 141, True, labels).placed


def test_the_scheduler_rules_on_labels_that_are_not_numbers():
    gt = [{"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["38145"]}]
    assert p.unmet({"nvidia.com/gpu.memory": "80GB"}, {}, gt)  # Gt on a non-integer: no match
    assert p.unmet({"nvidia.com/gpu.memory": "81920"}, {}, gt) is None
    assert p.detect([{"gpus": 1, "labels": GKE_L4}, {"gpus": 0, "labels": {}}]) == ["gke"]
    assert p.detect([{"gpus": 1, "labels": {**EKS_G5, "nvidia.com/gpu.memory": "23028"}}]) == [
        "eks",
        "gfd",
    ]


def test_the_package_records_its_scheme_and_what_it_could_not_place():
    spec = {"pipelineInfo": {"description": "Score. [autocomp backend >=2.15.0]"}}
    p.stamp(spec, "labels", ["1x40gb", "2x80gb"])
    assert spec["pipelineInfo"]["description"] == (
        "Score. [autocomp placement labels; unplaced 1x40gb,2x80gb] [autocomp backend >=2.15.0]"
    )
    assert p.stamped(spec) == ("labels", ["1x40gb", "2x80gb"])
    p.stamp(spec, "gke", [])
    assert p.stamped(spec) == ("gke", [])
    assert spec["pipelineInfo"]["description"].endswith("[autocomp backend >=2.15.0]")


# ----------------------------------------------------------------------------- the grammar


@pytest.mark.parametrize(
    "key", ["sku", "nvidia.com/gpu", "a" * 63, "example.com/a-b_c.d"]
)  # fmt: skip
def test_valid_label_keys_pass(key):
    assert v.check_label_key("tolerations", key) == key


@pytest.mark.parametrize(
    "key", ["", "with space", "a\nb", "a/b/c", "/x", "x/", "-x", "a" * 64, "Ex ample.com/x",
            "UPPER.com/x", "x_" ]
)  # fmt: skip
def test_label_keys_the_api_server_rejects_are_refused(key):
    with pytest.raises(UsageError):
        v.check_label_key("tolerations", key)


@pytest.mark.parametrize("name", ["", "reg cred", "../x", "Regcred", "a" * 254, "-a", "a_b"])
def test_pull_secret_names_that_are_not_object_names_are_refused(name):
    with pytest.raises(UsageError):
        v.check_dns_subdomain("pull_secrets", name)
    assert v.check_dns_subdomain("pull_secrets", "reg-cred.v2") == "reg-cred.v2"


@pytest.mark.parametrize(
    "registry", ["ghcr.io/me", "localhost:5000/a/b", "Registry.Example.com/team"]
)  # fmt: skip
def test_registries_in_the_reference_grammar_pass(registry):
    assert v.check_registry("AUTOCOMP_IMAGE_REGISTRY", registry) == registry


@pytest.mark.parametrize("registry", ["ghcr.io/My Team", "ghcr.io/me\n", "ghcr.io/Me", "a b"])
def test_registries_with_spaces_newlines_or_upper_case_paths_are_refused(registry):
    with pytest.raises(UsageError):
        v.check_registry("AUTOCOMP_IMAGE_REGISTRY", registry)


def test_argo_placeholders_outside_kfps_own_are_refused():
    ok = [{"deploymentSpec": {"executors": {"exec-a": {"container": {"args": ["{{$}}"]}}}},
           "root": {"x": "{{$.pipeline_job_uuid}}", "y": "{a: {b: 1}}"}}]  # fmt: skip
    v.check_placeholders(ok)
    for bad in ("title {{workflow.uid}}", "{{$}}", "{{inputs.parameters.x}}"):
        with pytest.raises(UsageError, match="Argo would substitute"):
            v.check_placeholders([{"root": {"models": bad}}])


# ----------------------------------------------------------------------------- compile + CLI


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--backend", "2.5.0,2.15.0"], "--backend"),
        (["--backend", "2.15.0 "], "--backend"),
        (["--toleration", "sku key=gpu:NoSchedule"], "--toleration"),
        (["--toleration", "a/b/c=gpu:NoSchedule"], "--toleration"),
        (["--toleration", "sku=gpu\nx:NoSchedule"], "--toleration"),
        (["--image-pull-secret", ""], "--image-pull-secret"),
        (["--image-pull-secret", "reg cred"], "--image-pull-secret"),
        (["--image-pull-secret", "../x"], "--image-pull-secret"),
        (["--placement", "labels"], "--placement"),
        (["--gpu-label", "48:pool=l40s"], "--placement"),
        (["--placement", "labels", "--gpu-label", "47:pool=x"], "--gpu-label"),
        (["--placement", "labels", "--gpu-label", "48:po ol=x"], "--gpu-label"),
    ],
)
def test_compile_refuses_values_the_cluster_would_reject_writing_nothing(
    flags, words, tmp_path, capsys
):
    out = tmp_path / "dist"
    assert main(["compile", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0], err
    assert not out.exists()


@pytest.mark.parametrize("registry", ["reg.example.com/My Team", "reg.example.com/x\ny"])
def test_compile_refuses_an_image_registry_outside_the_grammar(
    registry, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("AUTOCOMP_IMAGE_LOCK", str(tmp_path / "none.json"))
    monkeypatch.setenv("AUTOCOMP_IMAGE_REGISTRY", registry)
    from autocomp.pipelines.cluster import images

    images.image_lock.cache_clear()
    try:
        assert main(["compile", "--out", str(tmp_path / "dist")]) == 2
    finally:
        images.image_lock.cache_clear()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "AUTOCOMP_IMAGE_REGISTRY" in err[0]
    assert not (tmp_path / "dist").exists()


@pytest.mark.slow
def test_a_registry_title_with_an_argo_placeholder_never_reaches_the_yaml(
    tmp_path, capsys, monkeypatch
):
    from autocomp.scoring.registry import REGISTRY_ENV, REGISTRY_FILE

    shipped = yaml.safe_load(Path(REGISTRY_FILE).read_text())["models"][0]
    added = {**shipped, "name": "clip-placeholder", "title": "CLIP {{workflow.uid}}"}
    bad = tmp_path / "registry.yaml"  # a site's registry adds models (never replaces one)
    bad.write_text(yaml.safe_dump({"models": [added]}))
    monkeypatch.setenv(REGISTRY_ENV, str(bad))
    assert main(["compile", "--out", str(tmp_path / "dist")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "{{workflow.uid}}" in err[0], err
    assert not (tmp_path / "dist").exists()


def _docs(folder, pipeline):
    return list(yaml.safe_load_all((folder / f"{pipeline}.yaml").read_text()))


@pytest.mark.slow
@pytest.mark.parametrize("backend", [None, "2.5.0"])
def test_gke_packages_select_gke_accelerators_and_record_the_scheme(dist_for, backend):
    docs = _docs(dist_for(backend, placement="gke"), "evaluate_models")
    executors = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    score = executors["exec-score-1x24gb"]
    if backend is None:
        (term,) = score["nodeAffinity"]
        assert term["matchExpressions"][0]["key"] == "cloud.google.com/gke-accelerator"
        assert "nvidia-l4" in term["matchExpressions"][0]["values"]
        assert "nvidia-tesla-t4" not in term["matchExpressions"][0]["values"]
    else:
        assert score["nodeSelector"]["labels"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert p.stamped(docs[0]) == ("gke", [])
    assert "autocomp.io" not in yaml.safe_dump(docs)  # no label a node only gets by hand


@pytest.mark.slow
def test_submit_refuses_a_class_no_node_of_the_scheme_can_take(dist_for, capsys):
    from autocomp.pipelines.cluster.client import checked_params

    dist = dist_for(placement="labels", gpu_labels=("24:pool=small", "48:pool=mid"))
    docs = _docs(dist, "evaluate_models")
    scheme, unplaced = p.stamped(docs[0])
    assert scheme == "labels" and unplaced == ["2x80gb", "4x80gb"]
    big = next(m for c, ms in score_groups().items() if c.name == "2x80gb" for m in ms)
    with pytest.raises(UsageError, match="wait forever") as refused:
        checked_params("evaluate_models", dist, "job", [f"models=[{big}]", "name=b"])
    assert refused.value.value == big
    small = next(m for c, ms in score_groups().items() if c.name == "1x16gb" for m in ms)
    checked_params("evaluate_models", dist, "job", [f"models=[{small}]", "name=b"])


# ----------------------------------------------------------------------------- live nodes at submit


@pytest.mark.slow
@pytest.mark.parametrize("placement", ["gfd", "gke"])
def test_submit_refuses_a_score_class_no_live_node_takes_where_no_autoscaler_adds_one(
    dist_for, tmp_path, monkeypatch, capsys, placement
):
    """submit reads the nodes through the Kubernetes API (the stand-in) as doctor does: with
    GPU feature discovery labels (no autoscaler adds a node for them) a class no node takes is
    one line and no run; with GKE's accelerator label a node pool may be scaled up: a note."""
    from tests.pipelines.kfp_standin import KfpStandIn
    from tests.pipelines.kube_standin import KubeStandIn

    kube, api = KubeStandIn(), KfpStandIn()
    try:
        kube.add_node("t4", 1, {"nvidia.com/gpu.memory": "15360",
                                "cloud.google.com/gke-accelerator": "nvidia-tesla-t4"})  # fmt: skip
        monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig(tmp_path / "config")))
        dist = dist_for(placement=placement)
        base = ["--host", api.host, "--dist", str(dist)]
        assert main(["upload", *base, "--pipeline", "evaluate_models"]) == 0
        capsys.readouterr()
        run = ["submit", *base, "--pipeline", "evaluate_models", "--name", "e", "--param", "name=b"]
        # CLIP ViT-B/16 (1x16gb) fits the T4: submitted, no word about nodes
        assert main([*run, "--param", "models=[clip-vit-b-16]"]) == 0
        assert "no node" not in capsys.readouterr().err and len(api.runs) == 1
        # Gemma 3 12B (1x40gb): no live node takes it
        code = main([*run, "--param", "models=[clip-vit-b-16, gemma-3-12b-it]"])
        err = capsys.readouterr().err
        assert "gemma-3-12b-it" in err and "no node of this cluster takes it" in err
        if placement == "gfd":
            assert code == 2 and err.count("\n") == 1 and "wait forever" in err
            assert len(api.runs) == 1  # nothing created
        else:
            assert code == 0 and "lets an autoscaler add one" in err and len(api.runs) == 2
    finally:
        kube.close()
        api.close()
