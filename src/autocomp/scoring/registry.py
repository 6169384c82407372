"""The model registry: which models autocomp scores, with what backend, weights and resources.

Data in `autocomp/scoring/registry.yaml` (see its header) plus the files named by
$AUTOCOMP_MODEL_REGISTRY, which add models to it; this module loads and validates them. What a
backend is and which keys its entries take: autocomp.scoring.backends.
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autocomp.datafiles import check_keys, check_type
from autocomp.errors import UsageError
from autocomp.scoring import backends
from autocomp.store.catalog.ids import check_component

REGISTRY_FILE = Path(__file__).parent / "registry.yaml"
# files of a site's own models, separated like PATH: each ADDS to the shipped registry; a name
# registered twice is refused (an entry repeated unchanged, as a fine-tune's registry.yaml
# repeats its base model, is the same entry and is taken once)
REGISTRY_ENV = "AUTOCOMP_MODEL_REGISTRY"


_TYPES: dict[str, type | tuple[type, ...]] = {
    "name": str, "title": str, "weights": str, "dtype": str, "gpus": int,
    "gpu_memory_gb": (int, float), "trust_remote_code": bool, "allow_remote_code": bool,
    "architecture": str, "model_class": str, "preprocess": dict, "prompt": str,
    "base_model": str, "revision": str, "params_b": (int, float), "engine": str,
    "max_model_len": int,
}  # fmt: skip


@dataclass(frozen=True)
class ModelEntry:
    """One registered model."""

    name: str
    title: str
    backend: str
    score: str
    weights: str
    dtype: str
    gpus: int
    gpu_memory_gb: float
    trust_remote_code: bool
    architecture: str | None = None
    model_class: str | None = None
    preprocess: dict[str, Any] | None = None
    paper_name: str | None = None
    hf_hub: str | None = None
    notes: str | None = None
    prompt: str | None = None
    allow_remote_code: bool = False
    base_model: str | None = None  # hard-negative fine-tunes: the model they started from
    revision: str | None = None  # a hub commit to load (pinned weights); None: the main branch
    params_b: float | None = None  # billions of parameters (the multi-GPU placement planner)
    engine: str | None = None  # which of its backend's engines scores it (None: the default)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_tiny(self) -> bool:
        return self.weights == "tiny"

    @property
    def kind(self) -> backends.ScoringBackend:
        """What its backend is and can do (autocomp.scoring.backends)."""
        return backends.get(self.backend, f"model {self.name}")

    def value(self, key: str) -> Any:
        """The value of a registry key (a field, or a key only its backend knows), None if
        unset."""
        if key in ModelEntry.__dataclass_fields__ and key != "raw":
            return getattr(self, key)
        return self.raw.get(key)

    def record(self) -> dict[str, Any]:
        """How the model is recorded in output metadata."""
        return dict(self.raw)


def _load(path: str) -> dict[str, ModelEntry]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError("model registry", path, f"cannot be read ({exc.strerror})") from exc
    return _parse(text, path)


@functools.lru_cache(maxsize=4)
def _parse(text: str, path: str) -> dict[str, ModelEntry]:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())[:200]
        raise UsageError("model registry", path, f"is not valid YAML ({problem})") from None
    raw = check_keys(f"model registry {path}", raw, {"models"}, set())
    if not isinstance(raw["models"], list):
        raise UsageError(f"model registry {path}: models", raw["models"], "must be a list")
    entries: dict[str, ModelEntry] = {}
    for i, item in enumerate(raw["models"]):
        entry = _entry(path, i, item)
        if entry.name in entries:
            raise UsageError(f"model registry {path}", entry.name, "duplicate model name")
        entries[entry.name] = entry
    return entries


def _entry(path: str, i: int, item: dict[str, Any]) -> ModelEntry:
    where = f"model registry {path}: models[{i}]"
    if not isinstance(item, dict):
        raise UsageError(where, item, "must be a mapping (key: value)")
    backend = backends.get(item.get("backend"), where)
    check_keys(where, item, set(backend.required), set(backend.allowed))
    if item["score"] not in backend.scores:
        raise UsageError(where, item["score"], f"score must be one of {', '.join(backend.scores)}")
    for key, kind in _TYPES.items():
        if key in item:
            check_type(where, key, item[key], kind)
    if "engine" in item and item["engine"] not in backend.engine_names:
        raise UsageError(
            f"{where}: engine", item["engine"], f"must be one of {', '.join(backend.engine_names)}"
        )
    check_component(f"{where}: name", item["name"])  # <out>/<name>/ is its folder
    fields = {k: v for k, v in item.items() if k in ModelEntry.__dataclass_fields__}
    return ModelEntry(**fields, raw=dict(item))


def all_models(path: str | Path | None = None) -> dict[str, ModelEntry]:
    """Every registered model, by name, in registry order: the shipped registry, then each file
    of $AUTOCOMP_MODEL_REGISTRY (separated like PATH), which adds its models; or, with `path`,
    that file's models alone."""
    import os

    if path:
        return _load(str(path))
    models = dict(_load(str(REGISTRY_FILE)))
    origin = dict.fromkeys(models, str(REGISTRY_FILE))
    for extra in filter(None, os.environ.get(REGISTRY_ENV, "").split(os.pathsep)):
        for name, entry in _load(extra).items():
            _check_clash(models.get(name), entry, origin.get(name), extra)
            models[name], origin[name] = entry, origin.get(name, extra)
    return models


def _check_clash(known: ModelEntry | None, entry: ModelEntry, where: str | None, path: str) -> None:
    """A model registered twice is refused (the same entry repeated is taken once)."""
    if known is not None and known.raw != entry.raw:
        raise UsageError(
            f"model registry {path}",
            entry.name,
            f"is already registered (in {where}); give the model another name: "
            f"{REGISTRY_ENV} adds models and never replaces one",
        )


def get_model(name: str, path: str | Path | None = None) -> ModelEntry:
    """One model by name; unknown names get the closest registered names."""
    models = all_models(path)
    if name not in models:
        close = difflib.get_close_matches(name, list(models), n=3, cutoff=0.4)
        hint = f"closest: {', '.join(close)}; " if close else ""
        raise UsageError("models", name, f"unknown model; {hint}`autocomp models` lists all")
    entry = models[name]
    if entry.trust_remote_code and not entry.allow_remote_code:
        raise UsageError(
            "models",
            name,
            "its weights need trust_remote_code, which runs code from the hub; review that code, "
            "then set `allow_remote_code: true` on the entry in the registry to allow it",
        )
    return entry


def backend_class(entry: ModelEntry) -> type:
    """Import the scorer class of an entry's backend and engine (heavy imports happen only
    here)."""
    return entry.kind.scorer_class(entry.engine)
