"""Whether a run fits its store: the bytes the capacity plan says a run leaves in the store
(capacity.plan's `storage`, for the steps of the pipeline submitted) against the room the store
has. `submit`, `schedule` and `doctor` refuse a run that cannot fit, with one line naming both
numbers and the fix, before anything is sent.

The room: what the user declares (`--store-capacity 2Ti`), else KFP's own store (bucket
`mlpipeline`), whose volume is 20Gi on every release autocomp targets (`third-party/minio/base/
minio-pvc.yaml` 2.2.0-2.14.x; `third-party/seaweedfs/base/seaweedfs/seaweedfs-pvc.yaml`
2.15.0-2.17.0, `storage: 20Gi`; kubeflow/manifests v1.9.1-v1.11.0 ship those files), shared
with every KFP artifact of the cluster. Any other bucket: unknown (S3 reports no size; MinIO
reports one only to an administrator), so the check is skipped with a note.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from autocomp.errors import UsageError

GIB = 2**30
KFP_BUCKET = "mlpipeline"
KFP_STORE_BYTES = 20 * GIB  # the 20Gi PVC of KFP's MinIO / SeaweedFS (see the module doc)
KFP_STORE_SOURCE = ("KFP's own store: its volume is 20Gi (minio-pvc.yaml to 2.14, "
                    "seaweedfs-pvc.yaml 2.15-2.17), shared with every KFP artifact")  # fmt: skip
CAPACITY_FLAG = "store_capacity"
UNITS = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15,
         "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40, "pi": 2**50}  # fmt: skip
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgtp]i?)?b?", re.IGNORECASE)

# what each pipeline leaves in the store: plan.storage's entries by their key's first word
# (finetune_models reads a published benchmark; its bytes are not planned by count: unchecked)
KEPT = {
    "generate_benchmark": ("work/render", "work/validate", "work/tables", "benchmarks"),
    "evaluate_models": ("results",),
}
KEPT["generate_and_evaluate"] = KEPT["generate_benchmark"] + KEPT["evaluate_models"]


def parse_size(text: str) -> float:
    """`2Ti`, `500Gi`, `1.5TB`, `800G`, `21474836480` as bytes (Kubernetes' binary and decimal
    suffixes); anything else is one UsageError."""
    found = _SIZE.fullmatch(str(text).strip())
    if not found or float(found.group(1)) <= 0:
        raise UsageError(CAPACITY_FLAG, text, "must be a size like 2Ti, 500Gi or 800GB")
    return float(found.group(1)) * UNITS[(found.group(2) or "").lower()]


def store_room(store: str, declared: str | None) -> tuple[float, str] | None:
    """(bytes, where the number comes from) of `store`, or None when it is not known."""
    if declared:
        return parse_size(declared), f"declared: {CAPACITY_FLAG} {declared}"
    bucket = store.removeprefix("s3://").split("/", 1)[0]
    if store.startswith("s3://") and bucket == KFP_BUCKET:
        return float(KFP_STORE_BYTES), KFP_STORE_SOURCE
    return None


def planned_bytes(pipeline: str, params: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """The bytes a run of `pipeline` with `params` (defaults included) leaves in the store,
    by what holds them (capacity.plan at the run's count, specs and models)."""
    from autocomp.pipelines.cluster import capacity

    models = params.get("models") or ["all"]
    made = capacity.plan(capacity.DESIGN_PROFILE, int(params.get("count") or 0) or None,
                         models, specs=params.get("specs"))  # fmt: skip
    kept = KEPT.get(pipeline, ())
    parts = {k: v for k, v in made.storage.items() if k.split(" ")[0] in kept}
    return sum(parts.values()), parts


def _size(value: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if value >= scale:
            return f"{value / scale:,.1f} {unit}"
    return f"{value:,.0f} B"


def check_store_room(
    pipeline: str, params: dict[str, Any], declared: str | None = None,
    note: Callable[[str], None] | None = None,
) -> str:  # fmt: skip
    """Refuse (one UsageError) a run whose planned bytes exceed its store's room; returns the
    line doctor prints. An unknown room is a note, not a refusal."""
    store = str(params.get("store", ""))
    if pipeline not in KEPT:
        return f"{store}: {pipeline} is not planned by count; not checked"
    need, parts = planned_bytes(pipeline, params)
    room = store_room(store, declared)
    biggest = max(parts.items(), key=lambda kv: kv[1], default=("", 0.0))
    detail = f"{_size(need)} planned" + (
        f" ({biggest[0].split(' ')[0]} {_size(biggest[1])} of it)" if biggest[0] else ""
    )
    if room is None:
        said = (f"{store}: {detail}; its room is not known: declare it with "
                f"--store-capacity (e.g. 2Ti) to have it checked")  # fmt: skip
        if note is not None:
            note(said)
        return said
    size, source = room
    if need > size:
        raise UsageError(
            "store", store,
            f"cannot hold this run: {detail} but it holds {_size(size)} ({source}); use a "
            "bucket of your own (docs/cluster.md, The store) or a smaller --param count=N "
            "(autocomp plan --count N shows the bytes)",
        )  # fmt: skip
    return f"{store}: {detail}, room {_size(size)} ({source})"


def check_package_room(
    pipeline: str, params: dict[str, Any], spec: dict[str, Any], declared: str | None = None,
    note: Callable[[str], None] | None = None,
) -> str:  # fmt: skip
    """check_store_room for a run of a compiled package: its defaults under `params`."""
    from autocomp.pipelines.cluster.packages import input_definitions

    defaults = {}
    for name, definition in input_definitions(spec).items():
        if "defaultValue" in definition:
            value = definition["defaultValue"]
            integer = definition["parameterType"] == "NUMBER_INTEGER"
            defaults[name] = int(value) if integer else value
    return check_store_room(pipeline, {**defaults, **params}, declared, note)
