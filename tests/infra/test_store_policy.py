"""Every store request autocomp makes, held to the per-profile keys of multi-user KFP 2.15.0,
2.16.1 (SeaweedFS 4.00) and 2.17.0 (SeaweedFS 4.34): the rules in tests/infra/s3_policy.py
(each citing its source line), enforced by a stand-in in front of moto_server."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
import pytest

from autocomp.errors import UsageError
from autocomp.store.probe import probe_store
from tests.infra.s3_policy import (
    Call,
    PolicyStandin,
    Profile,
    legacy_actions_400,
    profile_policy,
    route,
)
from tests.infra.test_storage import s3_server  # noqa: F401  (the moto_server fixture)
from tests.store.test_publish import _benchmark

RELEASES = ("2.15.0", "2.16.1", "2.17.0")


def _decide(release: str, method: str, key: str = "", headers: dict | None = None,
            batch: tuple[str, ...] = (), **query: str) -> bool | None:  # fmt: skip
    call = Call(method, "mlpipeline", key, dict(query), headers or {}, batch)
    return Profile(release).decide(call)[0]


# ----------------------------------------------------------------------------- the rules, by hand


def test_the_profile_policy_as_seaweedfs_400_reads_it():
    # GetActions at 4.00: Put*/Get*/List* on each path, as Write/Read/List:<bucket>/<path>
    actions = legacy_actions_400(profile_policy("2.15.0", "team"))
    assert "Write:mlpipeline/shared/*" in actions and "List:mlpipeline/private/team/*" in actions
    assert len(actions) == 12
    # 4.00 would refuse 2.17's document (s3:DeleteObject is no statement action there)
    with pytest.raises(ValueError, match="DeleteObject"):
        legacy_actions_400(profile_policy("2.17.0", "team"))


@pytest.mark.parametrize(
    ("method", "key", "query", "old", "new"),
    [
        ("PUT", "shared/autocomp/x", {}, True, True),  # PutObject
        ("GET", "shared/autocomp/x", {}, True, True),  # GetObject
        ("HEAD", "shared/autocomp/x", {}, True, True),  # HeadObject: Read / s3:GetObject
        ("DELETE", "shared/autocomp/x", {}, True, True),  # 4.00: Write on the key; 2.17: granted
        ("PUT", "autocomp/x", {}, False, False),  # outside the profile's prefixes
        ("PUT", "private/team/a/x", {}, True, True),
        ("PUT", "private/other/a/x", {}, False, False),
        ("HEAD", "", {}, False, True),  # HeadBucket: Read:mlpipeline/; 2.17's AllowHeadBucket
        ("PUT", "", {}, False, False),  # CreateBucket: Admin
        ("GET", "", {"location": ""}, False, False),  # GetBucketLocation
        ("GET", "", {"list-type": "2", "prefix": "shared/autocomp/"}, True, True),
        ("GET", "", {"list-type": "2", "prefix": ""}, False, False),  # the bucket's root
        ("GET", "", {"list-type": "2", "prefix": "private/other/"}, False, False),  # Deny
        ("POST", "shared/autocomp/big", {"uploads": ""}, True, True),  # multipart: PutObject
        ("PUT", "shared/autocomp/big", {"partNumber": "1", "uploadId": "u"}, True, True),
    ],
)
def test_seaweedfs_verdicts_by_hand(method, key, query, old, new):
    assert _decide("2.15.0", method, key, **query) is old
    assert _decide("2.16.1", method, key, **query) is old
    assert _decide("2.17.0", method, key, **query) is new


def test_bulk_delete_and_copies():
    keys = ("shared/autocomp/a", "shared/autocomp/b")
    # DeleteObjects: 4.00 checks Write on the bucket (object "/"); 4.34 checks each key
    assert _decide("2.15.0", "POST", batch=keys, delete="") is False
    assert _decide("2.17.0", "POST", batch=keys, delete="") is True
    assert _decide("2.17.0", "POST", batch=(*keys, "private/other/x"), delete="") is False
    inside = {"x-amz-copy-source": "/mlpipeline/shared/autocomp/a"}
    outside = {"x-amz-copy-source": "/mlpipeline/private/other/a"}
    assert _decide("2.17.0", "PUT", "shared/autocomp/c", inside) is True
    assert _decide("2.17.0", "PUT", "shared/autocomp/c", outside) is False  # the source's read
    assert _decide("2.15.0", "PUT", "shared/autocomp/c", outside) is True  # 4.00: dest only
    assert route(Call("GET", "mlpipeline", "", {"acl": ""}, {})) is None  # not modelled: 501


# ----------------------------------------------------------------------------- through the stand-in


def _example_policy(bucket: str, prefix: str) -> dict:
    import json
    from pathlib import Path

    text = (Path(__file__).parents[2] / "manifests/examples/store-iam-policy.json").read_text()
    return json.loads(text.replace("BUCKET", bucket).replace("PREFIX", prefix))


@pytest.fixture
def profile(s3_server, monkeypatch, request):  # noqa: F811
    release, policy = request.param, None
    if release == "iam":  # the least policy docs/cluster.md gives for a bucket of one's own
        policy = _example_policy("bucket", "team/autocomp-iam")
    found = Profile(release, policy=policy)
    standin = PolicyStandin(s3_server, found)
    monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", f"http://127.0.0.1:{standin.port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "team-key")  # the profile's keys, not the admin's
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "team-secret")
    for name in ("AUTOCOMP_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    yield found
    standin.close()


def _store_operations(tmp_path, store: str) -> None:
    """Every store request the steps and verbs make, through the library's own functions."""
    from autocomp.analysis.report import assemble_run
    from autocomp.store.catalog.benchmarks import open_published
    from autocomp.store.images import StoreImages
    from autocomp.store.publish import fetch_benchmark, publish_stage
    from autocomp.store.s3 import S3Store
    from autocomp.store.stores import open_store
    from autocomp.store.work import PartLog

    bench = _benchmark(tmp_path)
    target = open_store(store)
    # render's images into the store, validate's reads (StoreImages) and their listing
    images = StoreImages(target, "work/render/k/images")
    images.write("c1/minimal.png", b"png")
    assert images.read("c1/minimal.png") == b"png" and images.present("c1") == {"c1/minimal.png"}
    # publish (streamed part by part), fetch (the CLI's route), open_published (the steps')
    publish_stage(bench, tmp_path / "render", tmp_path / "work", store, "b1")
    fetched = fetch_benchmark(store, "b1", tmp_path / "f", tmp_path / "fetched.parquet")
    streamed = open_published(store, "b1")
    assert sum(b.num_rows for b in streamed.batches()) == pq.read_table(fetched).num_rows == 12
    # a score step: parts committed, the log listed on resume, a part read by range, the run
    # published by copies inside the store, the log cleared key by key
    (tmp_path / "part.txt").write_text("part 0")
    log = PartLog(target, "work/score/abc", {"model": "m"})
    log.commit(0, {"part.txt": tmp_path / "part.txt"}, stage="score")
    assert list(PartLog(target, "work/score/abc", {"model": "m"}).committed()) == [0]
    entry = log.committed()[0]["files"][0]
    with target.writer("results/b1/m", {"stage": "score"}) as writer:
        writer.add_copy("part.txt", f"{log.name(0)}/part.txt", entry["size"], entry["sha256"])
    assert log.clear() == 2 and log.committed() == {}
    # report --store: the benchmark's view, each model's run, listed under results/b1/
    run = assemble_run(target, "b1", tmp_path / "run")
    assert (run / "results" / "m" / "part.txt").read_text() == "part 0"
    # a file over the multipart threshold (a benchmark part with its images)
    big = S3Store(store, part_size=5 * 1024 * 1024)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "part.bin").write_bytes(b"x" * (6 * 1024 * 1024))
    big.put("work/big", tmp_path / "big")
    assert big.delete("work/big") == 2
    # doctor --store
    assert probe_store(store).ok


@pytest.mark.infra
@pytest.mark.parametrize("profile", [*RELEASES, "iam"], indirect=True)
def test_every_store_operation_is_allowed_by_the_profile_policy(profile, tmp_path):
    store = f"s3://mlpipeline/shared/autocomp-{profile.release}"
    if profile.release == "iam":
        store = "s3://bucket/team/autocomp-iam"
    _store_operations(tmp_path, store)
    assert profile.refused == []
    operations = {s[0] for s in profile.seen}
    assert operations >= {"PutObject", "GetObject", "HeadObject", "ListObjectsV2", "CopyObject",
                          "DeleteObject", "CreateMultipartUpload", "UploadPart",
                          "CompleteMultipartUpload"}  # fmt: skip
    # never a bucket-level request (the old write path's HeadBucket, the client's
    # GetBucketLocation, DeleteObjects)
    assert not operations & {"HeadBucket", "CreateBucket", "GetBucketLocation", "DeleteObjects"}
    # every listing under the store's prefix
    lists = [s[1] for s in profile.seen if s[0] == "ListObjectsV2"]
    assert all(p.startswith(store.split("/", 3)[3] + "/") for p in lists), lists


def test_the_example_policy_is_least():
    """Each statement of manifests/examples/store-iam-policy.json is needed by some request
    autocomp makes (the last only for GetBucketLocation, AWS without a region)."""
    policy = _example_policy("bucket", "runs")
    needs = [("PUT", "runs/a", {}), ("GET", "", {"list-type": "2", "prefix": "runs/w/"}),
             ("GET", "", {"location": ""})]  # fmt: skip
    for index, (method, key, query) in enumerate(needs):
        call = Call(method, "bucket", key, query, {})
        assert Profile("iam", policy=policy).decide(call)[0] is True
        less = {**policy, "Statement": [s for i, s in enumerate(policy["Statement"]) if i != index]}
        assert Profile("iam", policy=less).decide(call)[0] is False
    outside = Call("PUT", "bucket", "other/a", {}, {})
    assert Profile("iam", policy=policy).decide(outside)[0] is False


@pytest.mark.infra
@pytest.mark.parametrize("profile", ["2.15.0", "2.17.0"], indirect=True)
def test_a_refused_request_names_the_action_the_key_and_the_statement(profile, tmp_path):
    from autocomp.store.publish import publish_stage

    bench = _benchmark(tmp_path)
    with pytest.raises(UsageError) as info:  # the bucket's root: no profile may write there
        publish_stage(bench, tmp_path / "render", tmp_path / "w", "s3://mlpipeline/autocomp", "b")
    text = str(info.value)
    assert "\n" not in text and "AccessDenied" in text and "s3:" in text, text
    assert "'autocomp/benchmarks/b/" in text, text
    assert '"Resource": "arn:aws:s3:::mlpipeline/autocomp/*"' in text, text
    probe = probe_store("s3://mlpipeline/private/other/autocomp")
    assert not probe.ok and probe.passed == ()
    assert "may not s3:PutObject on key 'private/other/autocomp/doctor/probe-" in probe.failure
    assert '"arn:aws:s3:::mlpipeline/private/other/autocomp/*"' in probe.failure


@pytest.mark.infra
@pytest.mark.parametrize("profile", ["2.15.0", "2.17.0"], indirect=True)
def test_the_requests_autocomp_gave_up_are_the_ones_the_policies_refuse(profile, monkeypatch):
    """What the old write path sent, straight from the client: HeadBucket and DeleteObjects
    (refused on 2.15/2.16, allowed on 2.17: #13469) and GetBucketLocation (refused on both)."""
    import os

    from minio import Minio
    from minio.deleteobjects import DeleteObject
    from minio.error import S3Error

    host = os.environ["AUTOCOMP_S3_ENDPOINT"].split("//")[1]
    client = Minio(host, "team-key", "team-secret", secure=False, region="us-east-1")
    client.put_object("mlpipeline", "shared/x/a", io.BytesIO(b"a"), 1)
    new = profile.release >= "2.17"
    try:
        assert client.bucket_exists("mlpipeline") is True
        head = True
    except S3Error as exc:
        head = exc.code != "AccessDenied"
    assert head is new
    try:
        bulk = list(client.remove_objects("mlpipeline", [DeleteObject("shared/x/a")])) == []
    except S3Error as exc:
        bulk = exc.code != "AccessDenied"
    assert bulk is new
    with pytest.raises(S3Error, match="AccessDenied"):  # no region: GetBucketLocation first
        Minio(host, "team-key", "team-secret", secure=False).stat_object("mlpipeline", "shared/x")


@pytest.mark.slow
@pytest.mark.infra
@pytest.mark.parametrize("profile", ["2.15.0", "2.17.0"], indirect=True)
def test_a_score_step_commits_resumes_and_publishes_under_the_profile_policy(profile, tmp_path):
    """The pipelines' score step as it runs (scoring.score streaming a published benchmark,
    committing parts, publishing the run), then again (the published run is taken)."""
    from autocomp.config import ScoreConfig
    from autocomp.scoring import score
    from autocomp.store.catalog.benchmarks import open_published
    from autocomp.store.publish import publish_stage
    from autocomp.store.stores import open_store

    store = f"s3://mlpipeline/shared/score-{profile.release}"
    bench = _benchmark(tmp_path)
    publish_stage(bench, tmp_path / "render", tmp_path / "work", store, "b1")
    config = ScoreConfig(device="cpu", max_candidates=20)
    first = score(["tiny-clip"], open_published(store, "b1"), tmp_path / "a", config,
                  store=store, results="results/b1")  # fmt: skip
    again = score(["tiny-clip"], open_published(store, "b1"), tmp_path / "b", config,
                  store=store, results="results/b1")  # fmt: skip
    assert again.equals(first) and profile.refused == []
    target = open_store(store)
    assert target.manifest("results/b1/tiny-clip") is not None
    assert [o.key for o in target.list("work/score")] == []  # the parts' log is cleared
    assert {"CopyObject", "DeleteObject"} <= {s[0] for s in profile.seen}


@pytest.mark.slow
@pytest.mark.infra
@pytest.mark.parametrize("profile", ["2.15.0", "2.17.0"], indirect=True)
def test_range_pods_and_their_merge_run_under_the_profile_policy(profile, tmp_path):
    """evaluate_models with K = 2 ranges, as its pods run: each range pod glances at every part
    (footers, id and candidate columns, ranged reads), verifies and streams its own, commits its
    parts; collect's merge publishes the run. No request is refused, and the result is the one
    pod's."""
    import dataclasses

    from autocomp.config import ScoreConfig
    from autocomp.scoring import score
    from autocomp.scoring.ranges import merge
    from autocomp.scoring.registry import get_model
    from autocomp.store.catalog.benchmarks import open_published
    from autocomp.store.publish import publish_stage
    from autocomp.store.stores import open_store

    store = f"s3://mlpipeline/shared/ranges-{profile.release}"
    bench = _benchmark(tmp_path)
    publish_stage(bench, tmp_path / "render", tmp_path / "work", store, "b1")
    config = ScoreConfig(device="cpu", max_candidates=20)
    for k in (1, 2):
        ranged = dataclasses.replace(config, part_range=f"{k}/2")
        table = score(["tiny-clip"], open_published(store, "b1"), tmp_path / f"r{k}", ranged,
                      store=store, results="results/b1")  # fmt: skip
        assert table.num_rows == 0  # a range publishes nothing
    assert merge(get_model("tiny-clip"), open_published(store, "b1"), config, store, "results/b1")
    merged = open_store(store).manifest("results/b1/tiny-clip")
    one = f"s3://mlpipeline/shared/one-{profile.release}"
    publish_stage(bench, tmp_path / "render", tmp_path / "work1", one, "b1")
    score(["tiny-clip"], open_published(one, "b1"), tmp_path / "one", config, store=one,
          results="results/b1")  # fmt: skip
    single = open_store(one).manifest("results/b1/tiny-clip")
    assert merged is not None and single is not None

    def predictions(manifest: dict) -> list[tuple[str, str]]:
        return [(f["path"], f["sha256"]) for f in manifest["files"]
                if f["path"].startswith("predictions/")]  # fmt: skip

    assert predictions(single) and predictions(merged) == predictions(single)
    assert profile.refused == []
    assert "GetObject" in {s[0] for s in profile.seen}


def _walk_stores() -> dict[str, str]:
    """Each walk-through of docs/cluster.md -> the store its commands name (`--param store=`)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "cluster.md").read_text()
    walks = doc.split("## Three walk-throughs", 1)[1].split("\n## ", 1)[0]
    found = {}
    for section in walks.split("\n### ")[1:]:
        title = section.split("\n", 1)[0].strip()
        stores = set(re.findall(r"--param store=(s3://\S+)", section))
        assert len(stores) == 1, (title, stores)
        # every submit names it: without, a run goes to KFP's own 20Gi store, which the
        # capacity check refuses at --count 1000
        lines = section.replace("\\\n", " ").splitlines()
        submits = [line for line in lines if line.startswith("autocomp submit")]
        assert submits and all("--param store=s3://" in line for line in submits), title
        found[title] = stores.pop()
    return found


WALK_STORES = _walk_stores()


@pytest.mark.infra
@pytest.mark.parametrize("title", sorted(WALK_STORES))
def test_each_walk_through_store_takes_every_operation_under_its_least_policy(
    title,
    s3_server,  # noqa: F811
    monkeypatch,
    tmp_path,
):
    """The store each walk-through names, under the least IAM policy docs/cluster.md gives for
    it (manifests/examples/store-iam-policy.json with its bucket and prefix): every request of
    every step and verb is allowed, none bucket-level."""
    store = WALK_STORES[title]
    bucket, prefix = store.removeprefix("s3://").split("/", 1)
    found = Profile("iam", policy=_example_policy(bucket, prefix))
    standin = PolicyStandin(s3_server, found)
    try:
        monkeypatch.setenv("AUTOCOMP_S3_ENDPOINT", f"http://127.0.0.1:{standin.port}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "team-key")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "team-secret")
        for name in ("AUTOCOMP_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"):
            monkeypatch.delenv(name, raising=False)
        _store_operations(tmp_path, store)
    finally:
        standin.close()
    assert found.refused == [] and found.seen, title
    assert not {s[0] for s in found.seen} & {"HeadBucket", "CreateBucket", "DeleteObjects"}
