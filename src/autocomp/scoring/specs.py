"""`--model` values: registered names and models outside the registry, as researchers name them.

    NAME                                a registered model (`autocomp models`)
    open_clip:ARCH:PRETRAINED           an open_clip architecture with a tag of its pretrained
                                        table (open_clip.list_pretrained()), file:/path/to/ckpt
                                        (a relative file:NAME is looked up in
                                        AUTOCOMP_WEIGHTS_DIR) or a checkpoint path
    open_clip:hf-hub:ORG/NAME           an open_clip export on the hub (open_clip_config.json)
    open_clip:local-dir:/path           the same, in a local folder
    hf:ORG/NAME[@REVISION] | hf:PATH    a hub repository or a local folder; the backend comes
                                        from its files: open_clip_config.json -> open_clip;
                                        a config.json with a vision_config and a transformers
                                        class in `architectures` -> transformers_vlm (loglik)

Resolution runs in two passes so that a mistake in any value fails before model 1 loads:
`parse_specs` (syntax, registered names, local folders, duplicate names: no heavy import, well
under a second) and `resolve_spec` (open_clip's tables, the hub's config files, transformers'
classes). An ad-hoc model becomes a ModelEntry like a registered one (name safe as a folder
name, score inferred: cosine for CLIP, sigmoid for SigLIP, loglik for generative models); its
`record()` carries the `spec` it came from, so run.json says what was scored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autocomp.errors import UsageError
from autocomp.scoring.registry import ModelEntry, get_model
from autocomp.store.catalog.ids import check_component

HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
CONTRASTIVE_TYPES = {"clip", "siglip", "siglip2", "chinese_clip", "altclip", "metaclip_2"}
RESERVED = {
    "benchmark",
    "summary.parquet",
    "failed.json",
}  # names of what `score` keeps beside model folders
OPEN_CLIP_CONFIG = "open_clip_config.json"
AD_HOC_NOTE = "ad-hoc model (not in the registry): resources unknown"


@dataclass(frozen=True)
class ModelSpec:
    """One `--model` value after the syntax pass."""

    text: str  # as given
    kind: str  # registry | open_clip | hf | entry (a ModelEntry given as it is)
    name: str  # the model's name and output folder
    entry: ModelEntry | None = None  # registry
    architecture: str | None = None  # open_clip
    pretrained: str | None = None  # open_clip
    source: str | None = None  # hf: an absolute folder, or a hub id
    revision: str | None = None  # hf hub


def safe_name(text: str) -> str:
    """A folder name from any text: letters, digits, '.', '_' and '-' only."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:100].strip("-.")
    return name or "model"


def split_values(values: list[str]) -> list[str]:
    """Repeated --model values, each possibly a comma list, as one list (blanks dropped)."""
    return [v.strip() for value in values for v in value.split(",") if v.strip()]


def parse_spec(text: str) -> ModelSpec:
    """The syntax pass of one value (see the module doc)."""
    if text.startswith("open_clip:"):
        return _parse_open_clip(text)
    if text.startswith("hf:"):
        return _parse_hf(text)
    entry = get_model(text)
    return ModelSpec(text, "registry", entry.name, entry=entry)


def _parse_open_clip(text: str) -> ModelSpec:
    rest = text.removeprefix("open_clip:")
    if rest.startswith("local-dir:"):
        folder = Path(rest.removeprefix("local-dir:")).expanduser().resolve()
        _open_clip_folder(folder, text)
        return ModelSpec(text, "open_clip", safe_name(f"open_clip-{folder.name}"),
                         architecture=f"local-dir:{folder}")  # fmt: skip
    if rest.startswith("hf-hub:"):
        repo, _ = _hub_id(rest.removeprefix("hf-hub:"), text)
        return ModelSpec(text, "open_clip", safe_name(f"open_clip-{repo.replace('/', '-')}"),
                         architecture=f"hf-hub:{repo}")  # fmt: skip
    architecture, _, pretrained = rest.partition(":")
    if not architecture or not pretrained:
        raise UsageError(
            "models",
            text,
            "give open_clip:ARCH:PRETRAINED (e.g. open_clip:ViT-B-32:laion2b_s34b_b79k, or "
            "open_clip:ViT-B-32:file:/path/to/checkpoint.pt), open_clip:hf-hub:ORG/NAME or "
            "open_clip:local-dir:/path",
        )
    weights = pretrained.removeprefix("file:")
    shown = Path(weights).stem if ("/" in weights or pretrained.startswith("file:")) else weights
    return ModelSpec(text, "open_clip", safe_name(f"open_clip-{architecture}-{shown}"),
                     architecture=architecture, pretrained=pretrained)  # fmt: skip


def _hub_id(value: str, text: str) -> tuple[str, str | None]:
    repo, _, revision = value.partition("@")
    if not HUB_ID.match(repo) or (revision == "" and "@" in value):
        raise UsageError(
            "models",
            text,
            "is neither a local folder nor a hub id ORG/NAME[@REVISION]; check the path or id",
        )
    return repo, revision or None


def _parse_hf(text: str) -> ModelSpec:
    value = text.removeprefix("hf:")
    folder = Path(value).expanduser()
    if folder.is_dir():
        folder = folder.resolve()
        if not (folder / OPEN_CLIP_CONFIG).is_file() and not (folder / "config.json").is_file():
            raise UsageError(
                "models",
                text,
                f"{folder} holds neither config.json nor {OPEN_CLIP_CONFIG}; give the folder "
                "a model was saved to (save_pretrained, or an open_clip export)",
            )
        return ModelSpec(text, "hf", safe_name(f"hf-{folder.name}"), source=str(folder))
    if value.startswith(("/", "./", "../", "~")) or folder.exists():
        raise UsageError("models", text, f"no such folder {folder}; give a model folder")
    repo, revision = _hub_id(value, text)
    name = f"hf-{repo.replace('/', '-')}" + (f"-{revision}" if revision else "")
    return ModelSpec(text, "hf", safe_name(name), source=repo, revision=revision)


def parse_specs(values: str | ModelEntry | Sequence[str | ModelEntry]) -> list[ModelSpec]:
    """The syntax pass of every value (a `--model` value: a name, a spec or a comma list of
    them; or a ModelEntry, taken as it is): all fail or none (no heavy library is imported)."""
    if isinstance(values, (str, ModelEntry)):
        values = [values]
    specs: list[ModelSpec] = []
    for value in values:
        if isinstance(value, ModelEntry):
            check_component("models", value.name)  # <out>/<name>/ is its folder
            specs.append(ModelSpec(value.name, "entry", value.name, entry=value))
        else:
            specs += [parse_spec(t) for t in split_values([value])]
    if not specs:
        raise UsageError("models", ",".join(str(v) for v in values), "give at least one model")
    seen: dict[str, str] = {}
    for spec in specs:
        if spec.name in RESERVED:
            raise UsageError("models", spec.text, f"{spec.name!r} is reserved for the output")
        if spec.name in seen:
            raise UsageError(
                "models",
                spec.text,
                f"scores into the same folder {spec.name!r} as {seen[spec.name]!r}; give each "
                "model once",
            )
        seen[spec.name] = spec.text
    return specs


# ----------------------------------------------------------------------------- second pass


def _read_json(path: Path, text: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError("models", text, f"{path} is unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError("models", text, f"{path} is not a JSON object")
    return data


def _open_clip_folder(folder: Path, text: str) -> dict[str, Any]:
    """The open_clip_config.json of an exported open_clip folder that also holds weights."""
    if not (folder / OPEN_CLIP_CONFIG).is_file():
        raise UsageError(
            "models", text, f"{folder} holds no {OPEN_CLIP_CONFIG}; give an open_clip export"
        )
    if not any(next(folder.glob(f"*.{ext}"), None) for ext in ("safetensors", "bin", "pth")):
        raise UsageError(
            "models", text, f"{folder} holds no weights (*.safetensors, *.bin or *.pth)"
        )
    return _read_json(folder / OPEN_CLIP_CONFIG, text)


def _hub_json(repo: str, filename: str, revision: str | None, text: str) -> dict | None:
    """A JSON file of a hub repository (None if the repository has no such file)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, RemoteEntryNotFoundError

    try:
        path = hf_hub_download(repo, filename, revision=revision)
    except RemoteEntryNotFoundError:
        return None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        raise UsageError(
            "models",
            text,
            f"cannot read {filename} of {repo} ({type(exc).__name__}: {str(exc)[:120]}); on an "
            "offline machine download the model first (HF_HOME) or give its local folder "
            "(hf:/path); gated models need HF_TOKEN",
        ) from None
    return _read_json(Path(path), text)


def _configs(spec: ModelSpec) -> tuple[dict | None, dict | None]:
    """(open_clip_config.json, config.json) of an hf: source; either may be absent."""
    source = spec.source or ""
    if Path(source).is_dir():
        folder = Path(source)
        if (folder / OPEN_CLIP_CONFIG).is_file():
            return _open_clip_folder(folder, spec.text), None
        return None, _read_json(folder / "config.json", spec.text)
    open_clip_config = _hub_json(source, OPEN_CLIP_CONFIG, spec.revision, spec.text)
    if open_clip_config is not None:
        return open_clip_config, None
    config = _hub_json(source, "config.json", spec.revision, spec.text)
    if config is None:
        raise UsageError(
            "models", spec.text, f"{source} has neither {OPEN_CLIP_CONFIG} nor config.json"
        )
    return None, config


def _entry(spec: ModelSpec, **fields: Any) -> ModelEntry:
    common = {
        "name": spec.name, "dtype": "float16", "gpus": 1, "gpu_memory_gb": 0,
        "trust_remote_code": False, "notes": AD_HOC_NOTE,
    }  # fmt: skip
    values = {**common, **fields}
    return ModelEntry(**values, raw={**values, "spec": spec.text})


def _open_clip_entry(
    spec: ModelSpec, architecture: str, pretrained: str | None, config: dict | None = None
) -> ModelEntry:
    from autocomp.scoring.contrastive import open_clip_details

    details = open_clip_details(architecture, pretrained, spec.text, config)
    weights = details["weights"]
    title = architecture if weights == architecture else f"{architecture} / {weights}"
    return _entry(spec, title=title, backend="open_clip", architecture=architecture, **details)


def _contrastive_hint(spec: ModelSpec, kind: str) -> UsageError:
    return UsageError(
        "models",
        spec.text,
        f"is a transformers {kind} checkpoint without open_clip weights, and autocomp scores "
        "contrastive models with open_clip: give open_clip:ARCH:PRETRAINED (pairs: "
        "open_clip.list_pretrained()) or the hub repository of an open_clip export (one with "
        f"{OPEN_CLIP_CONFIG}, e.g. hf:timm/ViT-B-16-SigLIP)",
    )


def _hf_entry(spec: ModelSpec) -> ModelEntry:
    from autocomp.scoring.contrastive import open_clip_pair_for_hub

    source = spec.source or ""
    local = Path(source).is_dir()
    open_clip_config, config = _configs(spec)
    if open_clip_config is not None:
        architecture = f"local-dir:{source}" if local else f"hf-hub:{source}"
        if spec.revision:
            raise UsageError(
                "models", spec.text, "open_clip loads hub exports at their main branch only; "
                "drop @REVISION or download that revision and give its folder",
            )  # fmt: skip
        return _open_clip_entry(spec, architecture, None, open_clip_config)
    config = config or {}
    architectures = config.get("architectures") or []
    model_type = str(config.get("model_type", ""))
    model_class = str(architectures[0]) if architectures else ""
    if model_type in CONTRASTIVE_TYPES or model_class.endswith(("CLIPModel", "SiglipModel")):
        pair = None if local else open_clip_pair_for_hub(source)
        if pair is None:
            raise _contrastive_hint(spec, model_class or model_type)
        return _open_clip_entry(spec, pair[0], pair[1])
    if "vision_config" not in config or not model_class:
        raise UsageError(
            "models",
            spec.text,
            f"is not a vision-language model autocomp can score (model_type {model_type!r}, "
            f"architectures {architectures}); give an open_clip model or a transformers "
            "vision-language model (a config with vision_config)",
        )
    return _vlm_entry(spec, config, model_class)


def _vlm_entry(spec: ModelSpec, config: dict[str, Any], model_class: str) -> ModelEntry:
    from autocomp.scoring.generative import has_model_class

    if not has_model_class(model_class):
        remote = "auto_map" in config
        fix = (
            "its code lives in the repository (trust_remote_code); review it, then register the "
            "model with `allow_remote_code: true` (AUTOCOMP_MODEL_REGISTRY)"
            if remote
            else "this transformers has no such class; update transformers or register the model"
        )
        raise UsageError("models", spec.text, f"model class {model_class}: {fix}")
    dtype = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    return _entry(
        spec,
        title=spec.source or spec.text,
        backend="transformers_vlm",
        score="loglik",
        model_class=model_class,
        weights=spec.source,
        revision=spec.revision,
        dtype=dtype if dtype in ("float32", "float16", "bfloat16") else "bfloat16",
    )


def resolve_spec(spec: ModelSpec) -> ModelEntry:
    """The entry of a parsed value (open_clip's tables, hub config files, transformers)."""
    if spec.entry is not None:
        return spec.entry
    if spec.kind == "open_clip":
        architecture = spec.architecture or ""
        config = None
        if architecture.startswith("local-dir:"):
            config = _open_clip_folder(Path(architecture.removeprefix("local-dir:")), spec.text)
        elif architecture.startswith("hf-hub:"):
            repo = architecture.removeprefix("hf-hub:")
            config = _hub_json(repo, OPEN_CLIP_CONFIG, None, spec.text)
            if config is None:
                raise UsageError("models", spec.text, f"{repo} holds no {OPEN_CLIP_CONFIG}")
        return _open_clip_entry(spec, architecture, spec.pretrained, config)
    return _hf_entry(spec)


def resolve_models(values: str | Sequence[str | ModelEntry]) -> list[ModelEntry]:
    """Every --model value as an entry, all checked before any is used."""
    return [resolve_spec(spec) for spec in parse_specs(values)]
