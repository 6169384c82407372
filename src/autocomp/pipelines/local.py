"""The local default: both pipelines end to end on this machine through kfp.local
(`autocomp run`, `make demo`), with the tiny offline profile unless told otherwise.

The same pipeline definitions as on the cluster; kfp.local runs each component in a subprocess
of this Python (SubprocessRunner(use_venv=False)), keeps artifacts under <out>/kfp, and the store
is the local folder <out>/store (the cluster uses s3://...). Resource requests, retries and
Kubernetes settings are cluster-only and ignored here.
"""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import Any

TINY_GENERATION = {
    "captioner": "tiny-llm",
    "caption_engine": "transformers",
    "caption_fallback": "minimal",  # random-weight LLMs never pass the caption check
    "renderer": "tiny-sd3",
    "render_batch_size": 4,
    "detector": "tiny-grounding-dino",
    "segmenter": "tiny-sam2",
    "vqa": "tiny-qwen2.5-vl",
    "all_checks": True,  # random detectors reject everything: run every check to exercise it
    "keep_rejected": True,  # ...and keep the rejected samples, marked, so the rest can run
}
TINY_MODELS = ["tiny-clip", "tiny-siglip", "tiny-qwen2.5-vl"]
# The paper's models (pipeline defaults) on one GPU workstation: captions through transformers,
# since vLLM lives in its own image on the cluster.
PAPER_GENERATION = {"caption_engine": "transformers"}
PROFILES = {"tiny": (TINY_GENERATION, TINY_MODELS), "paper": (PAPER_GENERATION, ["all"])}


def run_local(
    out: str | Path,
    name: str = "local",
    specs: str = "color:2,position:2",
    count: int = 2,
    seed: int = 0,
    num_shards: int = 2,
    models: list[str] | None = None,
    generation: dict[str, Any] | None = None,
    profile: str = "tiny",
) -> dict[str, Any]:
    """Run generate_benchmark then evaluate_models under kfp.local; return where things are."""
    from kfp import local

    from autocomp.pipelines import evaluate_models as evaluate_module
    from autocomp.pipelines import generate_benchmark as generate_module

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if profile == "tiny":  # random weights: nothing to download
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("AUTOCOMP_CACHE", str(out / "cache"))
    store = str(out / "store")
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(out / "kfp"))
    default_settings, default_models = PROFILES[profile]
    settings = dict(default_settings if generation is None else generation)
    models = models or default_models
    generate_benchmark = generate_module.build(retries=False)
    evaluate_models = evaluate_module.build(retries=False)
    print_function = builtins.print  # kfp.local's indented_print can leave print patched
    try:
        published = generate_benchmark(
            name=name,
            store=store,
            specs=specs,
            count=count,
            seed=seed,
            num_shards=num_shards,
            **settings,
        )
        report = evaluate_models(name=name, store=store, models=models)
    finally:
        builtins.print = print_function
    return {"benchmark": published.output, "report": report.output, "store": store}
