"""Scoring backends as data: what each can do, asked by the modules that used to compare names.

A `ScoringBackend` describes one way of scoring models (open_clip, transformers VLMs, or one a
package outside autocomp adds): the scorer class that implements `autocomp.scoring.Scorer`
("module:Class", imported only when a model loads), the paper-table row group, the score kinds
an entry may declare, the keyword `--batch-size` sets, the registry keys an entry needs and may
carry, whether it scores without an image (`--blind`), with an image at all, with a per-request
instruction (the VQA judge), whether `autocomp finetune` trains it, which entry fields name
the hub repositories the cluster warm-up prefetches, and which engines can run its models
(`engines`: a registry entry's `engine:` picks one; the scores are the same, the speed is
not). The registry (scoring/registry.py), the score checks, the report's paper tables, the
warm-up, `autocomp models`, fine-tuning and the VQA judge ask these fields; nothing compares a
backend's name.

Backends are found in two places, in the manner of lm-evaluation-harness's `register_model`:
`SHIPPED` (autocomp's own), and the Python entry-point group `autocomp.scoring_backends`, whose
entry points name a `ScoringBackend` object (`name = "package.module:BACKEND"`). A package adds
a backend by declaring one in its metadata; the group is read once per process, the first time
a name that is not shipped is looked up (a shipped name never reads it), and an entry point is
loaded only when its backend is asked for. A name registered
twice (an entry point named like a shipped backend, or two packages with one name) is refused
with one line naming both. docs/backends.md shows a complete third-party backend.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol

from autocomp.errors import UsageError

ENTRY_POINT_GROUP = "autocomp.scoring_backends"
OTHER_GROUP = "other"  # the report's group of a model whose backend this machine lacks
COMMON_KEYS = frozenset(
    {"name", "title", "backend", "score", "weights", "dtype", "gpus", "gpu_memory_gb",
     "trust_remote_code"}
)  # fmt: skip
SHARED_OPTIONAL_KEYS = frozenset(
    {"paper_name", "hf_hub", "notes", "allow_remote_code", "prompt", "tiny_config", "base_model",
     "revision", "params_b"}
)  # fmt: skip


class Entry(Protocol):
    """What a backend reads of a registry entry (autocomp.scoring.registry.ModelEntry)."""

    @property
    def raw(self) -> dict[str, Any]: ...

    def value(self, key: str) -> Any: ...


@dataclass(frozen=True)
class ScoringBackend:
    """What one scoring backend is and can do (see the module doc)."""

    name: str  # what a registry entry's `backend:` says
    scorer: str  # "module:Class" of its Scorer, built as Class(entry, device=..., **options)
    group: str  # the paper tables' row group of its models (contrastive, generative, ...)
    scores: tuple[str, ...]  # the score kinds an entry may declare (`score:`)
    batch_option: str  # the scorer keyword `--batch-size` sets (candidate texts per forward)
    keys: frozenset[str] = frozenset()  # registry keys its entries need beyond COMMON_KEYS
    optional: frozenset[str] = frozenset()  # keys they may carry beyond SHARED_OPTIONAL_KEYS
    images: bool = True  # scores a caption against an image (False: --blind only)
    blind: bool = False  # scores a caption without an image (--blind likelihood / choice)
    prompts: bool = False  # follows ScoreRequest.prompt (may serve as the VQA judge)
    text_similarity: bool = False  # its scorer has text_similarities (a text embedding)
    finetune: bool = False  # `autocomp finetune` trains its models
    hub_ids: tuple[str, ...] = ("weights",)  # entry fields naming a hub repository to prefetch
    weights_label: str = "{weights}"  # how `autocomp models` shows an entry's weights
    default_engine: str = ""  # the name of the engine `scorer` is ("": the backend has one)
    engines: tuple[tuple[str, str], ...] = ()  # other engines: (name, "module:Class") pairs

    @property
    def required(self) -> frozenset[str]:
        """Every key an entry of this backend must have."""
        return COMMON_KEYS | self.keys

    @property
    def allowed(self) -> frozenset[str]:
        """Every key an entry of this backend may have besides the required ones."""
        return SHARED_OPTIONAL_KEYS | self.optional

    @property
    def engine_names(self) -> tuple[str, ...]:
        """The engines an entry may name (`engine:`), the default first; () if only one."""
        return (self.default_engine, *dict(self.engines)) if self.engines else ()

    def scorer_class(self, engine: str | None = None) -> type:
        """Import the scorer class of `engine` (None: the default one; heavy imports happen
        only here)."""
        path = self.scorer
        if engine and engine != self.default_engine:
            if engine not in dict(self.engines):
                raise UsageError(
                    f"backend {self.name}: engine",
                    engine,
                    f"must be one of {', '.join(self.engine_names) or self.default_engine}",
                )
            path = dict(self.engines)[engine]
        module, _, cls = path.partition(":")
        try:
            return getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError) as exc:
            raise UsageError(
                f"backend {self.name}",
                path,
                f"cannot be imported ({_one_line(exc)}); install the package that provides it",
            ) from exc

    def weights_text(self, entry: Entry) -> str:
        """An entry's weights as `autocomp models` shows them (`weights_label` filled in)."""
        return self.weights_label.format_map(_Blank(entry.raw))

    def hub_repo(self, entry: Entry) -> str | None:
        """The hub repository the warm-up prefetches for an entry (the first of `hub_ids` it
        sets), None if it sets none."""
        for key in self.hub_ids:
            value = entry.value(key)
            if value:
                return str(value)
        return None


def _one_line(exc: BaseException) -> str:
    """An exception as one short line (a third party's message may span several)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


class _Blank(dict):
    """A mapping whose missing keys read as empty text (weights_label of a sparse entry)."""

    def __missing__(self, key: str) -> str:
        return ""


SHIPPED: dict[str, ScoringBackend] = {
    backend.name: backend
    for backend in (
        ScoringBackend(
            name="open_clip",
            scorer="autocomp.scoring.contrastive:OpenClipScorer",
            group="contrastive",
            scores=("cosine", "sigmoid"),
            batch_option="text_batch",
            keys=frozenset({"architecture", "preprocess"}),
            finetune=True,
            text_similarity=True,
            hub_ids=("hf_hub",),  # `weights` is a tag of open_clip's table, not a repository
            weights_label="{architecture} / {weights}",
        ),
        ScoringBackend(
            name="transformers_vlm",
            scorer="autocomp.scoring.generative:VlmScorer",
            group="generative",
            scores=("loglik",),
            batch_option="chunk_size",
            keys=frozenset({"model_class"}),
            optional=frozenset({"engine", "max_model_len"}),
            blind=True,
            prompts=True,
            default_engine="transformers",  # the shared-prefix path (scoring/generative.py)
            engines=(("vllm", "autocomp.scoring.vllm_engine:VllmScorer"),),
        ),
    )
}
GROUP_ORDER = ("contrastive", "generative")  # the paper's row order; other groups follow by name


@functools.lru_cache(maxsize=1)
def _entry_points() -> dict[str, metadata.EntryPoint]:
    """The group's entry points by name (none loaded), a name registered twice refused."""
    found: dict[str, metadata.EntryPoint] = {}
    for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"{ENTRY_POINT_GROUP} entry point {point.value}"
        if point.name in SHIPPED:
            raise UsageError(where, point.name, "is a shipped backend's name; rename it")
        if point.name in found and found[point.name].value != point.value:
            raise UsageError(
                where, point.name, f"is also registered by {found[point.name].value}; rename one"
            )
        found[point.name] = point
    return found


@functools.cache
def _load_point(name: str) -> ScoringBackend:
    point = _entry_points()[name]
    where = f"{ENTRY_POINT_GROUP} entry point {point.value}"
    try:
        backend = point.load()
    except Exception as exc:  # a broken third-party package: one line, not a traceback
        raise UsageError(where, name, f"cannot be loaded ({_one_line(exc)})") from exc
    if callable(backend) and not isinstance(backend, ScoringBackend):
        backend = backend()
    if not isinstance(backend, ScoringBackend):
        raise UsageError(where, name, "must name a ScoringBackend (autocomp.scoring.backends)")
    if backend.name != name:
        raise UsageError(where, name, f"names a backend called {backend.name!r}; make them one")
    return backend


def names() -> list[str]:
    """Every backend name this machine knows: shipped ones first, then entry points."""
    return [*SHIPPED, *sorted(_entry_points())]


def find(name: Any) -> ScoringBackend | None:
    """The backend called `name`, or None if no shipped backend or entry point has it."""
    if not isinstance(name, str):  # a registry's `backend:` may hold anything YAML spells
        return None
    if name in SHIPPED:
        return SHIPPED[name]
    return _load_point(name) if name in _entry_points() else None


def get(name: Any, where: str = "backend") -> ScoringBackend:
    """The backend called `name`; an unknown name is a usage error listing the known ones."""
    backend = find(name)
    if backend is None:
        raise UsageError(
            where,
            name,
            f"backend must be one of {', '.join(names())} (a package adds one through the "
            f"{ENTRY_POINT_GROUP} entry points: docs/backends.md)",
        )
    return backend


def group_of(name: Any) -> str:
    """The paper tables' row group of a backend's models ("other" if this machine lacks it)."""
    backend = find(name)
    return backend.group if backend else OTHER_GROUP


def group_rank(group: str) -> tuple[int, str]:
    """Where a row group sorts: the paper's groups in its order, then the others by name,
    "other" last."""
    if group in GROUP_ORDER:
        return (GROUP_ORDER.index(group), group)
    return (len(GROUP_ORDER) + (group == OTHER_GROUP), group)
