"""Shards: how the generation stages split a run over workers and resume after a failure.

A stage's output is a folder. Rows are assigned to shard `i` of `k` by a stable hash of their
concept id (both conditions of a concept land in the same shard), and each shard is one Parquet
file, `<kind>-IIIII-of-KKKKK.parquet`, written atomically: a shard file either is complete or does
not exist. A re-run skips the shards that exist (after checking they were made by the same
configuration); a killed worker loses only its unfinished shard. Readers of a stage folder insist
that all `k` shards are present, so half a run is never read as a whole one.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp.errors import UsageError
from autocomp.store.atomic import sweep_stale
from autocomp.store.outputs import check_output
from autocomp.store.storage import file_sha256
from autocomp.store.tables import open_parquet, read_metadata

_NAME = re.compile(r"^(?P<kind>[a-z_]+)-(?P<i>\d{5})-of-(?P<k>\d{5})\.parquet$")


def shard_of(concept_id: str, num_shards: int) -> int:
    """The shard of a concept (stable across processes, machines and Python hash seeds)."""
    digest = hashlib.sha256(concept_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % num_shards


def shard_path(folder: str | Path, kind: str, shard: int, num_shards: int) -> Path:
    return Path(folder) / f"{kind}-{shard:05d}-of-{num_shards:05d}.parquet"


def check_shard_args(shard: int | None, num_shards: int) -> list[int]:
    """The shards one invocation runs: one (`--shard`) or all of them, in order."""
    if num_shards < 1:
        raise UsageError("num_shards", num_shards, "must be at least 1")
    if shard is None:
        return list(range(num_shards))
    if not 0 <= shard < num_shards:
        raise UsageError("shard", shard, f"must be between 0 and {num_shards - 1}")
    return [shard]


def prepare_folder(folder: str | Path) -> Path:
    """An output folder, checked before any work: a folder or nothing there, not under a file
    (store/outputs.py). It is created, with any missing parents, by the first shard written
    (`write_table`), so a run that fails before writing anything leaves no empty folder."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UsageError("out", str(folder), "is a file; give a folder for this stage's shards")
    if folder.is_dir():
        check_output(folder / "shard")  # the folder itself takes files
    else:
        check_output(folder)
    sweep_stale(folder)
    sweep_stale(folder / "images")
    return folder


def finished(path: Path, config: dict[str, Any]) -> bool:
    """Whether a shard file exists and was made with `config` (else: a clear error)."""
    if not path.is_file():
        return False
    made_by = read_metadata(path).get("config")
    if made_by != config:
        raise UsageError(
            "out",
            str(path.parent),
            f"already holds {path.name} made with another configuration; use a new folder "
            "(or delete it to start over)",
        )
    return True


def stage_files(
    path: str | Path, kind: str, option: str = "path", only: int | None = None
) -> list[Path]:
    """The shard files of a stage folder (all `k`, or shard `only`), or the one Parquet file
    given. Missing shards are an error that names them."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UsageError(option, str(path), f"no such folder; give the {kind} stage's --out")
    found: dict[int, Path] = {}
    totals = set()
    for file in sorted(path.iterdir()):
        match = _NAME.match(file.name)
        if match and match["kind"] == kind:
            found[int(match["i"])] = file
            totals.add(int(match["k"]))
    if not found:
        raise UsageError(option, str(path), f"holds no {kind} shards; run that stage first")
    if len(totals) > 1:
        raise UsageError(option, str(path), f"mixes shard counts {sorted(totals)}")
    total = totals.pop()
    if only is not None and not 0 <= only < total:
        raise UsageError("shard", only, f"must be between 0 and {total - 1} ({path} has {total})")
    wanted = set(range(total)) if only is None else {only}
    missing = sorted(wanted - set(found))
    if missing:
        raise UsageError(
            option,
            str(path),
            f"is missing {kind} shard(s) {', '.join(map(str, missing[:5]))} of {total}; "
            "run them (--shard) before the next stage",
        )
    return [found[i] for i in sorted(wanted)]


def unfinished(
    folder: Path, kind: str, shards: list[int], num_shards: int, record: dict[str, Any]
) -> list[int]:
    """The shards of `shards` whose `kind` file is not yet written by this configuration (a
    file made by another configuration is refused, see `finished`)."""
    return [s for s in shards if not finished(shard_path(folder, kind, s, num_shards), record)]


def read_stage(
    path: str | Path, kind: str, option: str = "path", only: int | None = None
) -> tuple[pa.Table, dict[str, Any]]:
    """All shards of a stage folder (or one Parquet file) as one table, with the metadata of the
    first shard. `only`: just that shard (a worker of a fanned-out pipeline sees only its own
    shard's folder)."""
    files = stage_files(path, kind, option, only)
    try:
        tables = [open_parquet(f, option).read() for f in files]
    except (OSError, pa.ArrowException) as exc:
        problem = " ".join(str(exc).split())[:160]
        raise UsageError(
            option, str(path), f"holds an unreadable {kind} shard ({problem})"
        ) from None
    return pa.concat_tables(tables, promote_options="default"), read_metadata(files[0])


def input_digest(path: str | Path, kind: str, option: str = "path", only: int | None = None) -> str:
    """The SHA-256 over the content of a stage's input (its shard files, in order): what
    resume keys on, with the configuration, so a finished shard made from another input with
    the same name is never taken as done."""
    digest = hashlib.sha256()
    for file in stage_files(path, kind, option, only):
        digest.update(f"{file.name}\0{file_sha256(file)}\n".encode())
    return digest.hexdigest()


def collect_stage(folders: list[str | Path], out: str | Path) -> int:
    """Merge the shard folders of a fanned-out stage into one folder (hard links where the
    filesystem allows, else copies); the same file in two folders must be identical."""
    import filecmp
    import shutil

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if not path.is_file():
                continue
            target = out / path.relative_to(folder)
            if target.exists():
                if not filecmp.cmp(path, target, shallow=False):
                    raise UsageError("collect", str(target), "differs between two shard folders")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
            except OSError:
                shutil.copy2(path, target)
            count += 1
    return count
