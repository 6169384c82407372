"""Every ```sh / ```bash block of README.md, docs/usage/*.md and docs/*.md runs as written.

The blocks run in reading order (README.md, the usage pages in the order README links them,
USAGE, then docs/*.md by name) in one fresh folder, the
state a reader is in who follows the pages from the top: a `.venv` there is this test's Python
environment (what `make install` makes) and each block runs in bash with `set -e` after
`. .venv/bin/activate`, offline (HF_HUB_OFFLINE=1). Three rewrites make a block runnable on a
CPU without the hub or a cluster, and nothing else is changed:

- a model that needs hub weights is replaced by its tiny random-weight stand-in (TINY);
- the example cluster's addresses (its KFP endpoint, its registry) are the local stand-ins'
  (the `cluster` fixture: the KFP API stand-in, a registry stand-in holding the images, moto's
  S3 server as the store);
- the verbs whose default profile is the paper's (hub models, a GPU) get `--profile tiny`, and
  `curate` gets `--keep-rejected`: random weights reject every image, so, as the tiny profile
  of `autocomp run` does, the rejected samples are kept (marked) to run the rest of the chain.

A block that cannot run here is in SKIP with the reason; every entry of SKIP must name a block
that exists, so the list cannot go stale. FIXTURES stands in for what a reader brings (their
own images, a published benchmark folder) before the block that needs it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.infra.test_storage import s3_server  # noqa: F401  (moto_server, the reader's S3)
from tests.pipelines.kfp_standin import KfpStandIn
from tests.pipelines.registry_standin import RegistryStandIn

DIGEST = "sha256:" + "cd" * 32  # the digest `make images push` locked (a stand-in's)

ROOT = Path(__file__).resolve().parents[1]
# the usage pages in the README's order: a later page uses what an earlier one made
USAGE = ["benchmark", "scoring", "import", "report", "finetune", "audit", "cluster"]
DOCS = [
    ROOT / "README.md",
    *(ROOT / "docs" / "usage" / f"{name}.md" for name in USAGE),
    *sorted((ROOT / "docs").glob("*.md")),
]
BLOCK = re.compile(r"^```(?:sh|bash)\n(.*?)^```", re.DOTALL | re.MULTILINE)

# hub models the blocks name -> the tiny random-weight model of the same backend
TINY = {
    "siglip-so400m-14-384": "tiny-siglip",
    "clip-vit-b-16": "tiny-clip",
    "qwen2.5-vl-7b": "tiny-qwen2.5-vl",
    "gemma-3-12b-it": "tiny-llava",
}
# verbs whose --profile defaults to paper (Gemma / SD3.5 / Grounding DINO, A.9's step count)
PROFILED = re.compile(r"\bautocomp (caption|render|validate|finetune train)(?= )(?! --profile)")

# (page, the block's first line) -> why it does not run here
SKIP = {
    ("README.md", "make demo"): "make demo runs kfp.local for minutes (tests/pipelines runs "
    "it); make test is this suite",
    ("docs/usage/scoring.md", "autocomp score --out runs/scores --benchmark run-1 --store"): "a "
    "synopsis: its [optional] flags are not arguments and it needs an S3 store holding run-1 "
    "(tests/scoring/test_score_entry.py scores from a store)",
    ("docs/usage/import.md", "autocomp import autocomp-release --source release/"): "needs the "
    "downloaded Auto-Comp release, SugarCrepe and COCO val2017 (network); tests/importers build "
    "each layout",
    ("docs/usage/import.md", "autocomp import sugarcrepe --source sugarcrepe/"): "needs "
    "SugarCrepe and COCO val2017 (network); tests/analysis/test_report_sources.py reports on an "
    "import",
    ("docs/usage/import.md", "autocomp import aro-vg-relation --source aro/"): "needs the "
    "ARO, SugarCrepe++, CREPE and NaturalBench releases with COCO and Visual Genome images "
    "(network); tests/importers/test_harness_{aro,scpp,crepe,naturalbench}.py build each layout",
    ("docs/usage/import.md", "autocomp import winoground --source winoground/data"): "needs "
    "the downloaded Winoground, EqBen, MMVP-VLM and SPEC releases (network); "
    "tests/importers/test_harness_*.py build each release's layout and "
    "test_harness_report.py scores and reports one",
    ("docs/usage/report.md", "autocomp report --run runs/demo"): "needs `make demo`'s run "
    "(kfp.local, minutes) and an S3 store; the report of a run made here runs in the tour",
    ("docs/usage/finetune.md", "autocomp finetune local --out runs/finetune"): "kfp.local for "
    "minutes (tests/pipelines and tests/finetune run the pipeline)",
    ("docs/usage/audit.md", "autocomp audit export --benchmark store/benchmarks/run-1"): "needs a "
    "published benchmark with accepted samples, annotators answering in a browser (serve is a "
    "server) and a second VQA model; tests/audit runs each verb",
    ("docs/usage/audit.md", "autocomp audit export --benchmark runs/demo/benchmark"): "needs "
    "`make demo`'s run and annotators in a browser (serve is a server); tests/audit runs each verb",
    ("docs/usage/audit.md", "autocomp audit labelstudio-export study --out study-ls"): "needs "
    "a study (the blocks above are skipped) and Label Studio with annotators; "
    "tests/audit/test_labelstudio.py exports a study and reads Label Studio's JSON export back",
    ("docs/usage/cluster.md", "export AUTOCOMP_IMAGE_REGISTRY=registry.example.com/ml"): "buildah "
    "builds for minutes and pushes to your registry: .ci/images runs exactly this (.ci/release, "
    "against Debian's docker-registry on 127.0.0.1); the `cluster` fixture holds the lock it writes",
    (
        "docs/usage/cluster.md",
        "kubectl -n kubeflow create -f dist/jobs/model-cache-warmup.yaml",
    ): "a Kubernetes cluster (tests/pipelines/test_manifests.py validates the Job)",
    ("docs/cluster.md", "# 1. autocomp's ServiceAccount + RBAC"): "a cluster (kubectl, Kubeflow)",
    ("docs/finetune.md", "autocomp finetune local --out runs/finetune"): "kfp.local for minutes "
    "(tests/pipelines and tests/finetune run the pipeline)",
    # the EKS block first (its first line is the longer: keys match by prefix, first wins)
    ("docs/cluster.md", "NS=kubeflow-user-example-com                # your profile"): "a "
    "cluster (EKS, Kubeflow 1.10): tests/pipelines/test_walkthroughs.py compiles with its settings",
    ("docs/cluster.md", "NS=kubeflow-user-example-com"): "a cluster (GKE, Kubeflow 1.11): "
    "tests/pipelines/test_walkthroughs.py compiles with its settings",
    ("docs/cluster.md", "mkdir -p one && cat > one/kustomization.yaml"): "a cluster (a GPU node, "
    "standalone KFP): tests/pipelines/test_walkthroughs.py compiles with its settings",
    ("docs/cluster.md", "autocomp schedule --pipeline generate_and_evaluate --name weekly"): "a "
    "cluster's KFP_HOST and the uploaded packages: tests/pipelines/test_recurring_loop.py "
    "schedules generate_and_evaluate on the KFP stand-in and runs the fired run",
    ("docs/generation.md", "python benchmarks/generation_throughput.py --profile paper"): "a CUDA "
    "GPU and the paper's architectures",
}


def _images(folder: Path) -> None:
    """The reader's own images: one small PNG per `image` path of concepts.parquet."""
    from PIL import Image

    table = pq.read_table(folder / "concepts.parquet", columns=["image"])
    (folder / "imgs").mkdir(exist_ok=True)
    for i, name in enumerate(table.column("image").to_pylist()):
        Image.new("RGB", (64, 64), (37 * i % 256, 91 * i % 256, 53 * i % 256)).save(
            folder / "imgs" / name
        )


def _published(folder: Path) -> None:
    """A published benchmark folder `bench`: the README's benchmark with its images embedded,
    as data/test-00000-of-00001.parquet (`{bytes, path}` structs, the layout `publish` writes)."""
    import pyarrow as pa

    table = pq.read_table(folder / "benchmark.parquet")
    names = table.column("image").to_pylist()
    images = pa.array(
        [{"bytes": (folder / "imgs" / n).read_bytes(), "path": n} for n in names],
        pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
    )
    table = table.set_column(table.schema.get_field_index("image"), "image", images)
    (folder / "bench" / "data").mkdir(parents=True)
    pq.write_table(table, folder / "bench" / "data" / "test-00000-of-00001.parquet")


# (page, first line of the block) -> what the reader has brought before it
FIXTURES: dict[tuple[str, str], Callable[[Path], None]] = {
    ("docs/usage/benchmark.md", "autocomp negatives --input concepts.parquet"): _images,
    ("docs/finetune.md", "# one checkpoint"): _published,
}


def blocks() -> list[tuple[str, str, str]]:
    """(page, first line, text) of every sh/bash block, in reading order."""
    found = []
    for page in DOCS:
        for match in BLOCK.finditer(page.read_text(encoding="utf-8")):
            text = match.group(1)
            found.append((str(page.relative_to(ROOT)), text.strip().splitlines()[0], text))
    return found


def _key(table: dict, page: str, first: str) -> tuple[str, str] | None:
    return next((k for k in table if k[0] == page and first.startswith(k[1])), None)


def runnable(text: str, cluster: dict[str, str] | None = None) -> str:
    """The block with its hub models replaced by tiny ones and --profile tiny added, and the
    example cluster's addresses by the local stand-ins' (`cluster`: CLUSTER's)."""
    for address, here in (cluster or {}).items():
        text = text.replace(address, here)
    for model, tiny in TINY.items():
        text = re.sub(rf"(?<![\w.:/-]){re.escape(model)}", tiny, text)
    text = PROFILED.sub(r"autocomp \1 --profile tiny", text)
    return re.sub(r"\bautocomp curate(?= )", "autocomp curate --keep-rejected", text)


def test_every_skip_and_fixture_names_a_block():
    keys = {(page, first) for page, first, _ in blocks()}
    for table in (SKIP, FIXTURES):
        for page, prefix in table:
            assert any(p == page and f.startswith(prefix) for p, f in keys), (page, prefix)


def test_every_usage_page_is_read_in_order():
    pages = {p.stem for p in (ROOT / "docs" / "usage").glob("*.md")}
    assert pages == set(USAGE), pages ^ set(USAGE)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = re.findall(r"\(docs/usage/([a-z]+)\.md\)", readme)
    assert list(dict.fromkeys(linked)) == USAGE  # the README links them in reading order


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 160


def test_the_rewrites_are_only_models_and_profiles():
    line = (
        "autocomp finetune train --model clip-vit-b-16 --out x; autocomp finetune score --model a"
    )
    assert runnable(line) == (
        "autocomp finetune train --profile tiny --model tiny-clip --out x; "
        "autocomp finetune score --model a"
    )
    assert runnable("autocomp render --profile tiny --out r") == (
        "autocomp render --profile tiny --out r"
    )
    assert runnable("--model clip-vit-b-16-ft-confusion-k3-s0") == (
        "--model tiny-clip-ft-confusion-k3-s0"
    )


@pytest.fixture
def cluster(s3_server, tmp_path):  # noqa: F811
    """The reader's cluster, stood in on this machine: the KFP API stand-in, a registry holding
    the three images by digest with the lock `make images push` wrote for them (the skipped
    images block), moto's S3 server with the store's bucket. Yields (the example addresses ->
    the stand-ins', the environment a reader has, the KFP stand-in)."""
    import boto3

    from autocomp.pipelines.cluster.images import IMAGE_KINDS, image_keys, image_tag, tagged

    api, registry = KfpStandIn(tag_name="2.15.0"), RegistryStandIn()
    for kind in IMAGE_KINDS:
        registry.push(f"ml/autocomp-{kind}", DIGEST)
    endpoint = f"http://127.0.0.1:{s3_server}"
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")  # fmt: skip
    for bucket in ("mlpipeline", "autocomp-runs"):  # KFP's own store, and the reader's bucket
        s3.create_bucket(Bucket=bucket)
    addresses = {"https://kubeflow.example.com/pipeline": api.host,
                 "registry.example.com/ml": f"{registry.host}/ml"}  # fmt: skip
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({key: {"image": tagged(key, f"{registry.host}/ml", image_tag()),
                                      "digest": DIGEST} for key in image_keys()}))  # fmt: skip
    env = {**keys, "AUTOCOMP_S3_ENDPOINT": endpoint, "KUBECONFIG": str(tmp_path / "absent"),
           "AUTOCOMP_IMAGE_LOCK": str(lock),
           "AUTOCOMP_IMAGE_REGISTRY": addresses["registry.example.com/ml"]}  # fmt: skip
    yield addresses, env, api
    api.close()
    registry.close()


@pytest.mark.slow
def test_every_command_block_runs_as_written(tmp_path, cluster):
    folder = tmp_path / "reader"
    folder.mkdir()
    (folder / ".venv").symlink_to(Path(sys.prefix))
    assert (folder / ".venv" / "bin" / "activate").is_file(), "run the tests from a virtualenv"
    addresses, cluster_env, api = cluster
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUTOCOMP_", "KFP_"))}
    env.update(HF_HUB_OFFLINE="1", AUTOCOMP_CACHE=os.environ.get("AUTOCOMP_CACHE", ""))
    env.update(cluster_env)
    ran, skipped = [], []
    for page, first, text in blocks():
        if _key(SKIP, page, first):
            skipped.append((page, first))
            continue
        fixture = _key(FIXTURES, page, first)
        if fixture:
            FIXTURES[fixture](folder)
        script = f"set -e\n. .venv/bin/activate\n{runnable(text, addresses)}"
        done = subprocess.run(
            ["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
            timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, (
            f"{page} block `{first}` failed ({done.returncode}):\n{runnable(text)}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
        ran.append((page, first))
    assert len(skipped) == len(SKIP)
    # the cluster blocks reached the KFP stand-in: uploads, one run, one recurring run
    # (the four packages: generate, evaluate, finetune and the weekly loop that nests two)
    assert len(api.pipelines) == 4 and len(api.runs) == 1 and len(api.recurring) == 1
    assert len(ran) >= 6, ran
    # the reader's own images were scored, not failed as missing
    predictions = pq.read_table(folder / "runs" / "scores" / "tiny-clip" / "predictions")
    assert predictions.num_rows and not any(predictions.column("failed").to_pylist())
    # report went into the run, not ./report; the tour's too
    assert (folder / "run" / "report" / "index.html").is_file()
    assert (folder / "tour" / "report" / "index.html").is_file()
    assert not (folder / "report").exists()
