"""A new generator in one command (`autocomp schedule|submit --renderer NAME`): the compiled
package that runs that text-to-image model, made if the user's dist/ cannot.

A package places its render step on GPUs of the size its renderer needs at compile time
(cluster.packages.check_placement refuses a renderer that needs larger ones, and its pods would
wait forever). `generator_dist` returns the user's dist/ when its package holds the renderer;
else it compiles the packages again into `<dist>/generators/<renderer>/`, with the options
dist/ was compiled with (compile.OPTIONS_FILE) and the render step's GPU size raised to the
renderer's tier (cluster.resources.tier_for), and returns that folder. The verb then uploads the
package as a new version of the same pipeline (content-addressed: an unchanged one is not sent
twice) and runs it with `renderer=NAME`; the publish step records the renderer in the
benchmark's card (store/publish.py dataset_card), so the runs of each generator are told
apart. Here, not in cluster/: it compiles (compile.py reads the definitions, which read
cluster/)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from autocomp.errors import UsageError
from autocomp.pipelines import plumbing

GENERATORS = "generators"  # <dist>/generators/<renderer>/: the packages compiled for one renderer


def _options(dist: Path) -> dict:
    from autocomp.pipelines.compile import OPTIONS_FILE

    path = dist / OPTIONS_FILE
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        raise UsageError("dist", str(dist), f"has no readable {OPTIONS_FILE} (the options it was "
                         "compiled with); compile it again with this autocomp "
                         "(`autocomp compile --out ...`)") from None  # fmt: skip


def generator_dist(
    pipeline: str, dist: str | Path, renderer: str, note: Callable[[str], None] | None = None
) -> Path:
    """The dist whose `pipeline` package runs `renderer` (see the module doc)."""
    from autocomp.generation.registry import get_generation_model
    from autocomp.pipelines.cluster.packages import check_placement, load_documents
    from autocomp.pipelines.cluster.resources import step_need, tier_for

    if "generate_benchmark" not in plumbing.parts(pipeline):
        raise UsageError("renderer", renderer, f"{pipeline} renders nothing; --renderer goes "
                         "with generate_benchmark or generate_and_evaluate")  # fmt: skip
    get_generation_model("renderer", renderer)  # a known renderer, or one line naming the known
    dist = Path(dist)
    docs = load_documents(pipeline, dist / f"{pipeline}.yaml")
    try:
        check_placement(pipeline, {"renderer": renderer}, docs)
        return dist
    except UsageError:
        pass  # its render step is placed on smaller GPUs: compile for this renderer
    from autocomp.pipelines.compile import compile_all

    options = _options(dist)
    size = tier_for(step_need("render", {"renderer": renderer}) or 0)
    options["gpu_sizes"] = {**options.get("gpu_sizes", {}), "render": size}
    out = dist / GENERATORS / renderer
    out.parent.mkdir(exist_ok=True)
    if note is not None:
        note(f"{renderer} needs {size} GB GPUs for render; compiling the packages for it "
             f"into {out} (the options of {dist}, render on {size} GB)")  # fmt: skip
    compile_all(out, **options)
    return out
