"""`autocomp doctor` against the KFP API stand-in, a local store and a real S3-protocol server
(moto_server); the cluster part (Secrets, PVC, GPU nodes) through its node-fitting rule, since no
Kubernetes API can run here."""

from __future__ import annotations

import pytest

from autocomp.cli.main import main
from autocomp.pipelines.cluster.compile import PIPELINES
from autocomp.pipelines.cluster.doctor import kfp_version, needed_classes, nodes_for
from autocomp.pipelines.cluster.resources import ScoreClass
from tests.infra.test_storage import s3_server  # noqa: F401  (the moto_server fixture)
from tests.pipelines.kfp_standin import KfpStandIn


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    assert main(["compile", "--out", str(out)]) == 0
    return out


@pytest.fixture
def no_kubeconfig(monkeypatch, tmp_path):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.setenv("HOME", str(tmp_path))


def _doctor(host: str, dist, *extra: str) -> list[str]:
    return ["doctor", "--host", host, "--dist", str(dist), *extra]


@pytest.mark.slow
def test_doctor_passes_a_ready_installation(compiled, tmp_path, no_kubeconfig, capsys):
    api = KfpStandIn(tag_name="2.14.3")
    try:
        assert main(["upload", "--host", api.host, "--dist", str(compiled)]) == 0
        capsys.readouterr()
        store = tmp_path / "store"
        assert main(_doctor(api.host, compiled, "--store", str(store))) == 0
    finally:
        api.close()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("PASS kfp: ") and "version 2.14.3 (single-user)" in lines[0]
    k = len(PIPELINES)
    assert [line.split(":")[0] for line in lines[1 : 1 + k]] == [
        f"PASS pipeline {name}" for name in PIPELINES
    ]
    assert lines[1 + k] == f"PASS store: {store} is reachable and writable"
    assert lines[2 + k].startswith("SKIP cluster: no kubeconfig") and "autocomp-hf" in lines[2 + k]
    assert lines[-1] == "doctor: all checks passed"
    assert (store / "doctor" / "probe" / "probe.txt").is_file()


@pytest.mark.slow
def test_doctor_fails_an_old_kfp_and_missing_pipelines(compiled, no_kubeconfig, capsys):
    api = KfpStandIn(tag_name="2.2.0", multi_user=True)
    try:
        with pytest.raises(SystemExit) as exit_:
            main(_doctor(api.host, compiled))
    finally:
        api.close()
    assert exit_.value.code == 1
    out = capsys.readouterr().out
    assert "FAIL kfp: version '2.2.0'; autocomp needs KFP 2.14 or later" in out
    assert out.count("is not uploaded there; run `autocomp upload`") == len(PIPELINES)
    assert "SKIP store: no --store given" in out
    assert f"doctor: {1 + len(PIPELINES)} check(s) failed" in out


@pytest.mark.slow
def test_doctor_says_when_nothing_answers(compiled, no_kubeconfig, capsys):
    with pytest.raises(SystemExit):
        main(_doctor("http://127.0.0.1:9", compiled))
    assert capsys.readouterr().out.startswith("FAIL kfp: http://127.0.0.1:9 does not answer")


@pytest.mark.infra
def test_doctor_checks_an_s3_store(s3_server, monkeypatch, capsys):  # noqa: F811
    from autocomp.pipelines.cluster.doctor import Report, check_store

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", f"http://127.0.0.1:{s3_server}")
    report = Report()
    check_store(report, "s3://autocomp/runs")
    assert report.failed == 0
    assert "PASS store: s3://autocomp/runs is reachable and writable" in capsys.readouterr().out
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    check_store(report, "s3://autocomp/runs")
    assert report.failed == 1 and "FAIL store: s3://autocomp/runs is not writable" in (
        capsys.readouterr().out
    )


def test_kfp_versions_are_read_from_tags():
    assert kfp_version("2.14.3") == (2, 14) and kfp_version("v2.15.0-rc.1") == (2, 15)
    assert kfp_version("dev") is None and kfp_version(None) is None
    assert kfp_version("2.9.0") < (2, 14)


def test_gpu_classes_are_matched_to_nodes_by_gpu_count_and_memory():
    nodes = [
        {"name": "l4", "gpus": 1, "labels": {"nvidia.com/gpu.memory": "23034"}},
        {"name": "a100x2", "gpus": 2, "labels": {"nvidia.com/gpu.memory": "40960"}},
        {"name": "h100x4", "gpus": 4, "labels": {"nvidia.com/gpu.memory": "81559"}},
        {"name": "unlabelled", "gpus": 8, "labels": {}},
    ]
    fits = nodes_for([ScoreClass(1, 40), ScoreClass(2, 80), ScoreClass(4, 80)], nodes)
    assert fits == {"1x40gb": ["a100x2", "h100x4"], "2x80gb": ["h100x4"], "4x80gb": ["h100x4"]}
    names = {c.name for c in needed_classes(["clip-vit-b-16", "qwen2.5-vl-72b"])}
    assert names == {"1x16gb", "2x80gb"}
    assert "cpu" not in {c.name for c in needed_classes(["all"])}


def test_doctor_checks_secrets_cache_and_gpu_nodes_through_the_kube_api(
    monkeypatch, capsys, tmp_path
):
    import base64

    from autocomp.pipelines.cluster.doctor import Report, check_cluster
    from tests.pipelines.kube_standin import KubeStandIn

    kube = KubeStandIn()
    try:
        monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig(tmp_path / "config")))
        b64 = base64.b64encode(b"x").decode()
        kube.add("team", "secrets", "autocomp-s3", data={"endpoint": b64, "access_key": b64})
        kube.add("team", "persistentvolumeclaims", "autocomp-model-cache", spec={})
        kube.add_node("a100", 1, {"nvidia.com/gpu.memory": "40960"})
        report = Report()
        check_cluster(report, "team", ["clip-vit-b-16", "qwen2.5-vl-72b"])
    finally:
        kube.close()
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "FAIL secret autocomp-s3: missing keys ['secret_key']",
        "FAIL secret autocomp-hf: not readable in team (Not Found); "
        "see manifests/base/hf-secret.template.yaml",
        "PASS pvc autocomp-model-cache: present",
        "PASS gpu class 1x16gb: nodes a100",
        "FAIL gpu class 2x80gb: no node has these GPUs (label nvidia.com/gpu.memory); "
        "leave its models out or add such nodes",
    ]
    assert report.failed == 3
