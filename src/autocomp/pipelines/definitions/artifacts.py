"""How data moves between the generation and evaluation steps: large data through the store by
key, small manifests and tables as KFP artifacts (what a 20 Gi artifact store and the launcher's
one-file-at-a-time copies can carry at paper scale).

- `shard_plan` decides where the run's work lives (`plan_work`: `work/render/<key>` for the
  images and render shards, `work/validate/<key>` for the verdicts; each key a digest of what
  the work depends on: the captions' content and the stage's configuration) and hands that on as
  a `location.json` artifact.
- A render shard writes its images straight into the store (store.images.StoreImages), then its
  table, committed as `<prefix>/shards/render-IIIII-of-KKKKK`; its artifact is that table.
- A validate shard reads only its shard's images from the store and commits its verdicts every
  few batches (store.work.TableJournal), then the shard's table.
- curate gathers every shard's tables from the store (`gather_shards`: no `dsl.Collected`, so
  no KFP 2.14+ fan-in); negatives' candidate table goes to the store (`store_table`); publish
  reads it and the images from the store and writes the benchmark's Parquet parts back to it.
- A step retried or resubmitted with the same inputs finds what was committed (a shard's table,
  an image, a part of verdicts or scores) and redoes only the rest; what was made with another
  configuration lives under another key and is never taken.

No kfp here: the components import this module inside the image.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from autocomp.store.storage import Store, file_sha256
from autocomp.store.work import Location, TableJournal, digest, work_prefix


def plan_work(
    captions: str | Path, store: str, render: Any, validate: Any, out: str | Path
) -> Location:
    """Where the run's render and validate work lives in the store, written to `out`."""
    from autocomp.generation.render import render_record
    from autocomp.generation.validate import validate_record

    rendered = work_prefix("render", render_record(captions, render))
    checked = work_prefix("validate", {"render": rendered, **validate_record(validate, None)})
    location = Location(store, rendered, {"validate": checked, "num_shards": render.num_shards})
    location.write(out)
    return location


def shard_name(prefix: str, kind: str, shard: int, num_shards: int) -> str:
    return f"{prefix}/shards/{kind}-{shard:05d}-of-{num_shards:05d}"


def _take(store: Store, name: str, key: str, folder: Path) -> bool:
    """Fetch a committed shard made with `key` into `folder`; False when there is none."""
    manifest = store.manifest(name)
    if manifest is None or manifest.get("made_by", {}).get("key") != key:
        return False
    store.get(name, folder)
    return True


def commit_file(store: Store, name: str, path: Path, key: str, stage: str) -> None:
    """One file as the output `name` (manifest last), made with `key`; an output there made
    with another key is replaced, never kept."""
    manifest = store.manifest(name)
    if manifest is not None and manifest.get("made_by", {}).get("key") != key:
        store.delete(name)
    with store.writer(name, {"stage": stage, "key": key}) as writer:
        writer.add_file(path.name, path)


def render_shard(
    captions: str | Path, work: str | Path, config: Any, shard: int, out: str | Path
) -> None:
    """One render shard into the store (images as they are made, then the shard's table);
    the table is also written to `out` (the step's artifact). A committed shard is taken as
    it is; a killed one keeps the images it wrote."""
    from autocomp.generation.render import render_record, render_stage
    from autocomp.store.images import StoreImages
    from autocomp.store.shards import shard_path

    location = Location.read(work)
    store = location.open()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    name = shard_name(location.prefix, "render", shard, config.num_shards)
    key = digest(render_record(captions, config))
    if not _take(store, name, key, out):
        render_stage(captions, out, config, shard, images=StoreImages(store, location.prefix))
        commit_file(store, name, shard_path(out, "render", shard, config.num_shards), key, "render")


def validate_shard(
    table: str | Path, work: str | Path, config: Any, shard: int, out: str | Path
) -> None:
    """One validate shard: its images read from the store, its verdicts committed every few
    batches and then as the shard's table (also written to `out`, the step's artifact)."""
    from autocomp.generation.validate import validate_record, validate_stage
    from autocomp.store.catalog.schemas import VERDICTS_SCHEMA
    from autocomp.store.images import StoreImages
    from autocomp.store.shards import input_digest, shard_path

    location = Location.read(work)
    store = location.open()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    prefix = location.extra["validate"]
    name = shard_name(prefix, "verdicts", shard, config.num_shards)
    key = digest(validate_record(config, input_digest(table, "render", "render", only=shard)))
    if _take(store, name, key, out):
        return
    journal = TableJournal(store, prefix, "verdicts", config.num_shards, VERDICTS_SCHEMA)
    images = StoreImages(store, location.prefix)
    validate_stage(table, out, config, shard, images=images, journal=journal)
    commit_file(store, name, shard_path(out, "verdicts", shard, config.num_shards), key, "validate")


def gather_shards(work: str | Path, render: str | Path, verdicts: str | Path) -> int:
    """Every shard's render table into `render` and verdicts into `verdicts`, from the store
    (the fan-in of the shards, by key); a shard that is not there is a one-line error naming
    it. Returns the shard count."""
    location = Location.read(work)
    store = location.open()
    shards = int(location.extra["num_shards"])
    for shard in range(shards):
        store.get(shard_name(location.prefix, "render", shard, shards), render)
        store.get(shard_name(location.extra["validate"], "verdicts", shard, shards), verdicts)
    return shards


def store_table(path: str | Path, work: str | Path, out: str | Path) -> Location:
    """A table the next step reads from the store (negatives' candidate sets): committed as
    `work/tables/<16 hex of its SHA-256>` (content-addressed), its location written to `out`."""
    location = Location.read(work)
    path = Path(path)
    sha = file_sha256(path)
    name = f"work/tables/{sha[:16]}"
    commit_file(location.open(), name, path, sha, "table")
    found = Location(location.store, name)
    found.write(out)
    return found


def publish_run(
    benchmark: str | Path,
    work: str | Path,
    concepts: str | Path,
    survival: str | Path,
    name: str,
    models: dict[str, str] | None = None,
) -> str:
    """Publish the run's benchmark store to store: the candidate table (`benchmark`: its
    location) and the images read from the store, the Parquet parts written back to it.
    `models`: role -> the generation model the run used, named in the card (generated_by)."""
    from autocomp.store.catalog.benchmarks import open_stored
    from autocomp.store.images import StoreImages
    from autocomp.store.publish import publish_stage

    table, location = Location.read(benchmark), Location.read(work)
    source = open_stored(table.store, table.prefix)
    images = StoreImages(location.store, location.prefix)
    with tempfile.TemporaryDirectory(prefix="publish-") as scratch:
        return publish_stage(source, images, scratch, location.store, name, concepts, survival,
                             generated_by(models or {}))  # fmt: skip


def generated_by(models: dict[str, str]) -> dict[str, dict[str, str]]:
    """role -> {model, weights} for the card: `random` for a tiny model (built from its config
    with untrained weights: autocomp.tiny), else `pretrained`; roles without a model left out."""
    from autocomp.generation.registry import get_generation_model
    from autocomp.scoring.registry import get_model

    found = {}
    for role, name in models.items():
        if not name:
            continue
        tiny = (
            get_model(name).is_tiny if role == "vqa" else get_generation_model(role, name).is_tiny
        )
        found[role] = {"model": name, "weights": "random" if tiny else "pretrained"}
    return found


def use_registry(text: str) -> None:
    """The compiling machine's registry entries (a score class's) as this process's registry,
    not the image's (scoring.registry.REGISTRY_ENV)."""
    import os

    from autocomp.scoring.registry import REGISTRY_ENV

    path = os.path.join(tempfile.mkdtemp(prefix="registry-"), "registry.yaml")
    Path(path).write_text(text, encoding="utf-8")
    os.environ[REGISTRY_ENV] = path


def merge_ranges(store: str, name: str, models: list[str], config: Any) -> None:
    """Each model scored in part ranges published as results/<name>/<model> once every range is
    committed (scoring.ranges.merge); a model one pod scored is published already."""
    from autocomp.scoring.ranges import merge
    from autocomp.scoring.registry import get_model
    from autocomp.store.catalog.benchmarks import open_published

    source = open_published(store, name)
    for model in models:
        merge(get_model(model), source, config, store, f"results/{name}")


def collect_results(store: str, name: str, models: list[str], out: str | Path) -> Any:
    """One summary over the score runs published for `models` (results/<name>/<model>), read
    from the store (the fan-in of a score class, by key)."""
    from autocomp.store.catalog.runs import collect_runs
    from autocomp.store.stores import open_store

    opened = open_store(store)
    with tempfile.TemporaryDirectory(prefix="collect-") as scratch:
        folders = []
        for model in models:
            folder = Path(scratch) / model
            opened.get_file(f"results/{name}/{model}", "summary.parquet", _made(folder))
            folders.append(folder)
        return collect_runs(folders, out)


def _made(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "summary.parquet"
