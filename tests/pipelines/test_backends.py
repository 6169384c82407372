"""The compiled YAML per KFP backend (`autocomp compile --backend`): exactly the Kubernetes
fields that backend's proto knows (2.2-2.4.0 and 2.14+ refuse an unknown one), GPU placement it
applies, the run id it resolves, and the range recorded in the package; the matrix's verdict on
each server version, computed from the packages themselves."""

from __future__ import annotations

import copy

import pytest
import yaml

from autocomp.errors import UsageError
from autocomp.pipelines.cluster import backends
from autocomp.pipelines.compile import PIPELINES

pytestmark = pytest.mark.slow

COMMON = {
    "activeDeadlineSeconds", "emptyDirMounts", "emptyDirMounts.mountPath", "emptyDirMounts.sizeLimit",
    "emptyDirMounts.volumeName", "imagePullSecret", "imagePullSecret.secretName",
    "pvcMount", "pvcMount.constant", "pvcMount.mountPath",
    "secretAsEnv", "secretAsEnv.keyToEnv", "secretAsEnv.keyToEnv.envVar",
    "secretAsEnv.keyToEnv.secretKey", "secretAsEnv.secretName",
    "tolerations", "tolerations.key", "tolerations.operator",
}  # fmt: skip
SELECTOR = {"nodeSelector", "nodeSelector.labels"}
AFFINITY = {"nodeAffinity", "nodeAffinity.matchExpressions", "nodeAffinity.matchExpressions.key",
            "nodeAffinity.matchExpressions.operator", "nodeAffinity.matchExpressions.values"}  # fmt: skip
NAMES = {"pvcMount.pvcNameParameter", "secretAsEnv.secretNameParameter",
         "imagePullSecret.secretNameParameter"}  # fmt: skip
EXPECTED = {  # what each backend's proto knows and the driver applies, by hand from the table
    "2.3.0": COMMON | SELECTOR,
    "2.5.0": COMMON | SELECTOR | NAMES,
    "2.14.3": COMMON | AFFINITY | NAMES,
    "2.15.0": COMMON | AFFINITY | NAMES | {"secretAsEnv.optional"},
}


def _docs(folder, name: str) -> list[dict]:
    return list(yaml.safe_load_all((folder / f"{name}.yaml").read_text()))


def _executors(docs: list[dict]) -> dict[str, dict]:
    return docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


@pytest.mark.parametrize("backend", sorted(EXPECTED))
def test_each_backend_gets_exactly_the_fields_it_knows(dist_for, backend):
    folder = dist_for(backend, pull_secrets=("regcred",))
    target = backends.target_for(backend)
    fields = set()
    for name in PIPELINES:
        for config in _executors(_docs(folder, name)).values():
            fields |= backends.emitted(config)
    assert fields == EXPECTED[backend]
    assert all(backends.accepted(f, target.first) for f in fields)
    for release in backends.RELEASES:  # every release the target covers knows them
        if target.covers(release):
            assert all(backends.accepted(f, release) for f in fields)


def test_gpu_steps_are_placed_by_affinity_from_2_14_and_by_size_labels_before(dist_for):
    old = _executors(_docs(dist_for("2.5.0"), "generate_benchmark"))["exec-render"]
    assert old["nodeSelector"] == {"labels": {"autocomp.io/gpu-40gb": "true"}}
    new = _executors(_docs(dist_for("2.15.0"), "generate_benchmark"))["exec-render"]
    (term,) = new["nodeAffinity"]
    assert term["matchExpressions"] == [
        {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["38145"]}
    ]  # 40 GB = 38146 MiB: an A100-40GB (40960) and an L40S (46068) qualify, an L4 does not


def test_the_hf_secret_is_optional_only_where_the_backend_honours_it(dist_for):
    for backend, optional in (("2.14.3", None), ("2.15.0", True)):
        executors = _executors(_docs(dist_for(backend), "evaluate_models"))
        wiring = next(w for w in executors["exec-score-1x16gb"]["secretAsEnv"]
                      if w["secretName"] == "autocomp-hf")  # fmt: skip
        assert wiring.get("optional") is optional


def test_the_run_id_is_one_each_backend_resolves(dist_for):
    for backend, constant in (("2.3.0", "{{workflow.uid}}"), ("2.5.0", "{{$.pipeline_job_uuid}}")):
        spec = _docs(dist_for(backend), "generate_benchmark")[0]
        run_id = spec["root"]["dag"]["tasks"]["publish"]["inputs"]["parameters"]["run_id"]
        assert run_id["runtimeValue"]["constant"] == constant


def test_the_package_records_its_backend_range(dist_for):
    for backend, recorded in (("2.3.0", ((2, 3, 0), (2, 5, 0))), ("2.15.0", ((2, 15, 0), None))):
        spec = _docs(dist_for(backend), "evaluate_models")[0]
        assert backends.stamped_range(spec) == recorded
        assert spec["pipelineInfo"]["description"].startswith("Score registered models")


def test_the_strict_server_refuses_a_field_its_proto_lacks_and_takes_the_compat_package(
    dist_for,
):
    """KFP 2.14 parses each executor's Kubernetes config strictly when a run is created: the
    2.15 package's `optional` is refused there, the 2.14 package is taken."""
    from autocomp.pipelines.cluster.client import connect, pinned_version
    from autocomp.pipelines.cluster.uploads import upload
    from tests.pipelines.kfp_standin import KfpStandIn

    api = KfpStandIn(tag_name="2.14.3")
    try:
        client = connect(api.host)
        for backend, accepted in (("2.15.0", False), ("2.14.3", True)):
            package = dist_for(backend) / "evaluate_models.yaml"
            upload(client, "evaluate_models", package)
            pipeline_id, version_id = pinned_version(client, "evaluate_models", package)
            experiment = client.create_experiment("x").experiment_id
            try:
                client.run_pipeline(experiment_id=experiment, job_name="x",
                                    params={"name": "b"}, pipeline_id=pipeline_id,
                                    version_id=version_id)  # fmt: skip
                refused = None
            except Exception as exc:  # noqa: BLE001
                refused = exc
            assert (refused is None) == accepted
            if refused is not None:
                assert 'unknown field \\"optional\\"' in refused.body
    finally:
        api.close()


def test_compile_refuses_a_backend_it_cannot_run_on():
    with pytest.raises(UsageError, match="not supported: KFP 2.2.0: the launcher writes"):
        backends.target_for("2.2.0")
    with pytest.raises(UsageError, match="give a KFP backend version"):
        backends.target_for("latest")
    assert backends.target_for(None) is backends.DEFAULT_TARGET
    assert backends.target_for("2.16.1").name == "2.15"
    assert backends.target_for("2.4.1").name == "2.3" and backends.target_for("2.4").name == "2.3"


def test_each_kubeflow_release_has_its_verdict():
    names = {}
    for release, kfp in backends.KUBEFLOW.items():
        try:
            names[release] = backends.target_for(backends.shown(kfp)).name
        except UsageError:
            names[release] = None
    assert names == {"1.9.0": None, "1.9.1": "2.3", "1.10.0": "2.3", "1.10.1": "2.5",
                     "1.10.2": "2.5", "1.11.0": "2.15"}  # fmt: skip


def test_the_verdict_on_a_server_comes_from_the_package(dist_for):
    generate = _docs(dist_for("2.5.0"), "generate_benchmark")[0]
    refusals, degraded = backends.check_server(generate, (2, 5, 0))
    assert refusals == []  # no fan-in through dsl.Collected: curate reads the store
    assert any("only root-DAG tasks are retried" in d and "render, validate" in d for d in degraded)
    new = _docs(dist_for("2.15.0"), "generate_benchmark")[0]
    assert backends.check_server(new, (2, 15, 0)) == ([], [])
    assert backends.check_server(new, (2, 17, 0)) == ([], [])
    # a package that fans in with Collected (from the named loop `shards`) is refused before 2.16
    collecting = copy.deepcopy(new)
    step = next(c for c in collecting["components"].values() if "executorLabel" in c)
    step.setdefault("inputDefinitions", {}).setdefault("artifacts", {})["gathered"] = {
        "artifactType": {"schemaTitle": "system.Dataset"}, "isArtifactList": True}  # fmt: skip
    refusals, _ = backends.check_server(collecting, (2, 15, 0))
    assert len(refusals) == 1 and "#13239" in refusals[0] and "(shards)" in refusals[0]
    refusals, _ = backends.check_server(collecting, (2, 5, 0))
    assert any("dsl.Collected" in r for r in refusals)
    assert backends.check_server(collecting, (2, 16, 0)) == ([], [])
    assert "not verified" in backends.check_server(new, (2, 18, 0))[1][0]
    refusals, _ = backends.check_server(new, (2, 14, 3))
    assert "compiled for KFP 2.15.0 and later, the server is 2.14.3" in refusals[0]
    assert "`autocomp compile --backend 2.14.3`" in refusals[0]
