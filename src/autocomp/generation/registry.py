"""The generation registry: the models that *make* a benchmark (caption LLMs, text-to-image
generators, the object detector and the segmenter), as data in `generation/models.yaml`."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autocomp.datafiles import check_keys
from autocomp.errors import UsageError
from autocomp.errors import weights_error as weights_error_for

GENERATION_FILE = Path(__file__).parent / "models.yaml"
ROLES = ("captioner", "renderer", "detector", "segmenter")
_GEN_REQUIRED = {"name", "weights", "dtype", "gpus", "gpu_memory_gb", "settings"}
_GEN_OPTIONAL = {
    "captioner": {"model_class", "tiny_builder", "vllm"},
    "renderer": {"pipeline_class", "tiny_builder"},
    "detector": {"tiny_builder"},
    "segmenter": {"tiny_builder", "backend"},
}
BACKENDS = {"segmenter": ("transformers", "sam2")}  # detection.SEGMENTER_BACKENDS loads each

# Allowed values of model settings, by setting name: inclusive (low, high); None = unbounded.
# A `--set` value must also have the type of the registry's default (an int stays an int).
SETTING_RANGES: dict[str, tuple[float | None, float | None]] = {
    "temperature": (0, None),
    "top_p": (0, 1),
    "max_new_tokens": (1, None),
    "height": (8, None),
    "width": (8, None),
    "num_inference_steps": (1, None),
    "guidance_scale": (0, None),
    "box_threshold": (0, 1),
    "text_threshold": (0, 1),
    "brightness": (0, 255),
    "min_white_fraction": (0, 1),
}


def _kind_ok(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int)
    if isinstance(default, float):
        return isinstance(value, int | float)
    return isinstance(value, type(default))


def check_settings(entry: GenerationModel, overrides: dict[str, Any]) -> None:
    """Overrides of a model's settings are known keys, of the default's type, in range; checked
    before any model is loaded."""
    for key, value in overrides.items():
        if key not in entry.settings:
            known = ", ".join(entry.settings)
            raise UsageError("settings", key, f"is not a setting of {entry.name}; known: {known}")
        default = entry.settings[key]
        if not _kind_ok(default, value):
            kind = "number" if isinstance(default, int | float) else type(default).__name__
            raise UsageError(
                "settings", f"{key}={value!r}", f"{key} must be a {kind} (default {default!r})"
            )
        low, high = SETTING_RANGES.get(key, (None, None))
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = (
                f"{low if low is not None else '-inf'} to {high if high is not None else 'inf'}"
            )
            raise UsageError("settings", f"{key}={value!r}", f"{key} must be from {bounds}")


@dataclass(frozen=True)
class GenerationModel:
    """One model of the generation side (caption LLM, text-to-image, detector, segmenter)."""

    role: str
    name: str
    weights: str
    dtype: str
    gpus: int
    gpu_memory_gb: float
    settings: dict[str, Any]
    model_class: str | None = None
    pipeline_class: str | None = None
    tiny_builder: str | None = None
    vllm: dict[str, Any] | None = None  # a captioner's vllm.LLM engine arguments (vllm_engine.py)
    backend: str = "transformers"  # segmenters: transformers' port, or `sam2` (the original)

    @property
    def is_tiny(self) -> bool:
        return self.weights == "tiny"

    def source(self) -> str:
        """What from_pretrained loads: the hub id, or the folder of the built tiny model."""
        if not self.is_tiny:
            return self.weights
        from autocomp.tiny.generation import ensure

        return str(ensure(self.name, str(self.tiny_builder)))

    def record(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """How the model and its effective settings are recorded in output metadata."""
        return {
            "role": self.role,
            "name": self.name,
            "weights": self.weights,
            "dtype": self.dtype,
            "settings": {**self.settings, **(overrides or {})},
        }


@functools.lru_cache(maxsize=2)
def _generation(path: str) -> dict[str, dict[str, Any]]:
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    models: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        for i, item in enumerate(raw[f"{role}s"]):
            where = f"generation registry {path}: {role}s[{i}]"
            check_keys(where, item, _GEN_REQUIRED, _GEN_OPTIONAL[role])
            if item.get("backend", "transformers") not in BACKENDS.get(role, ("transformers",)):
                raise UsageError(where, item["backend"], f"backend must be one of "
                                 f"{', '.join(BACKENDS[role])}")  # fmt: skip
            models.setdefault(role, {})[item["name"]] = GenerationModel(role=role, **item)
    return models


def weights_error(option: str, entry: GenerationModel, exc: BaseException) -> UsageError:
    return weights_error_for(f"{option} {entry.name}", entry.weights, exc)


def generation_models(role: str, path: str | Path = GENERATION_FILE) -> dict[str, GenerationModel]:
    """Every registered model of one role, by name."""
    return _generation(str(path))[role]


def get_generation_model(
    role: str, name: str, path: str | Path = GENERATION_FILE
) -> GenerationModel:
    """One model of a role by name; unknown names get the registered names."""
    models = generation_models(role, path)
    if name not in models:
        raise UsageError(
            role,
            name,
            f"unknown {role}; registered: {', '.join(models)} (generation/models.yaml)",
        )
    return models[name]
