"""The one network deadline (autocomp.network) against a server that accepts connections and
never answers: `report --store`, `doctor --store-only` and doctor against such a Kubernetes API
(or KFP API) each end within it with one line. And what doctor reads from a Kubernetes API that
refuses, or answers with values it cannot use as they are (a GPU memory label `80GB`, allocatable
GPUs `1k`, a Secret whose data is not base64): one line each, never a traceback."""

from __future__ import annotations

import time

import pytest

from autocomp.cli.main import main
from autocomp.network import ENV, deadline
from tests.pipelines.kfp_standin import KfpStandIn
from tests.pipelines.kube_standin import KubeStandIn

DEADLINE_S = 1.0
SLACK_S = 6.0  # process work around the waits (imports, a kubeconfig, the lines)


@pytest.fixture
def short_deadline(monkeypatch):
    monkeypatch.setenv(ENV, str(DEADLINE_S))


def test_the_deadline_is_stated_once_and_overridable(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert deadline().read == 60 and deadline().connect == 10
    monkeypatch.setenv(ENV, "2.5")
    assert deadline().pair == (2.5, 2.5)
    monkeypatch.setenv(ENV, "soon")
    with pytest.raises(Exception, match=ENV):
        deadline()


def _timed(argv: list[str]) -> tuple[int, float]:
    started = time.monotonic()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, time.monotonic() - started


@pytest.mark.parametrize(
    "argv",
    [
        ["report", "--store", "s3://bucket/p", "--name", "ac", "--out", "{out}"],
        ["doctor", "--store-only", "--store", "s3://bucket/p"],
    ],
)
def test_a_silent_store_ends_within_the_deadline_with_one_line(
    argv, silent, short_deadline, monkeypatch, tmp_path, capsys
):
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", f"http://127.0.0.1:{silent}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    code, took = _timed([a.replace("{out}", str(tmp_path / "out")) for a in argv])
    out, err = capsys.readouterr()
    said = [line for line in (out + err).splitlines() if line.strip()]
    assert code != 0 and took < DEADLINE_S + SLACK_S, took
    assert len(said) == 1 and "unreachable" in said[0] and "Traceback" not in out + err, said
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_doctor_against_a_silent_kubernetes_and_kfp_api_ends_within_the_deadline(
    dist_for, silent, short_deadline, monkeypatch, tmp_path, capsys
):
    kubeconfig = KubeStandIn()
    try:
        config = kubeconfig.kubeconfig(tmp_path / "config")
    finally:
        kubeconfig.close()
    config.write_text(config.read_text().replace(kubeconfig.host, f"http://127.0.0.1:{silent}"))
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.setenv("HOME", str(tmp_path))
    dist = dist_for()
    api = KfpStandIn()
    try:
        code, took = _timed(["doctor", "--host", api.host, "--dist", str(dist)])
    finally:
        api.close()
    out = capsys.readouterr().out
    assert code == 1 and took < 3 * DEADLINE_S + SLACK_S, took  # + the registry look-ups
    assert "SKIP cluster: the Kubernetes API did not answer" in out and "Traceback" not in out
    code, took = _timed(["doctor", "--host", f"http://127.0.0.1:{silent}", "--dist", str(dist)])
    out = capsys.readouterr().out
    assert code == 1 and took < 3 * DEADLINE_S + SLACK_S, took
    assert out.startswith(f"FAIL kfp: http://127.0.0.1:{silent}: no KFP API answers there")


def _doctor_lines(kube: KubeStandIn, dist, monkeypatch, tmp_path) -> list[str]:
    from autocomp.pipelines.cluster.doctor import Report, check_cluster, load_packages

    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig(tmp_path / "config")))
    monkeypatch.setenv("HOME", str(tmp_path))
    report = Report()
    check_cluster(report, "team", load_packages(report, dist), ["clip-vit-b-16"], None)
    return report


@pytest.mark.slow
def test_odd_values_from_the_kubernetes_api_are_one_line_each(
    dist_for, monkeypatch, tmp_path, capsys
):
    kube = KubeStandIn(pullable=set())
    try:
        kube.add("team", "secrets", "autocomp-s3", type="Opaque",
                 data={"endpoint": "not base64!", "access_key": "eA==", "secret_key": "eA=="})  # fmt: skip
        kube.add_secret("team", "autocomp-hf", {"token": ""})
        kube.add_node("weird-memory", 1, {"nvidia.com/gpu.memory": "80GB"})
        kube.add_node("weird-count", 0, {"nvidia.com/gpu.memory": "81920"})
        kube.nodes[-1]["status"]["allocatable"]["nvidia.com/gpu"] = "1k"
        _doctor_lines(kube, dist_for(), monkeypatch, tmp_path)
    finally:
        kube.close()
    out = capsys.readouterr().out
    assert "Traceback" not in out
    assert (
        "FAIL secret autocomp-s3: not readable in team (Secret autocomp-s3: the data of key " in out
    )
    assert "PASS gpu 1x (nvidia.com/gpu.memory >= 15258): " in out
    assert (
        out.split("PASS gpu 1x (nvidia.com/gpu.memory >= 15258): ")[1]
        .split("\n")[0]
        .endswith("on weird-count")
    )  # 1k GPUs = 1000 (a quantity); the 80GB node does not qualify (Gt needs an integer)
    from autocomp.pipelines.cluster.doctor import fitting

    place = {"gpus": 1, "floor": 15258, "labels": {}, "tolerations": [], "disk": 0}
    node = {"name": "weird-memory", "gpus": 1, "labels": {"nvidia.com/gpu.memory": "80GB"}}
    assert fitting(place, node) == "nvidia.com/gpu.memory 80GB < 15258"


def test_a_refused_kubernetes_api_is_one_line(dist_for, monkeypatch, tmp_path, capsys):
    kube = KubeStandIn()
    kube.close()
    kube.server.server_close()  # nothing listens there any more: connection refused
    config = kube.kubeconfig(tmp_path / "config")
    monkeypatch.setenv("KUBECONFIG", str(config))
    from autocomp.pipelines.cluster import kube as kubeapi

    with pytest.raises(kubeapi.KubeError, match="did not answer"):
        kubeapi.connect().nodes()
