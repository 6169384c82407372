"""KFP lightweight components: one per stage, each a thin wrapper around one autocomp stage
function (no logic here).

- A component is declared with the kind of image it runs in (`@component("gpu")`); the image
  itself is resolved when a pipeline is built for the cluster (definitions.builder.Build), never
  at import.
- A component takes its stage's configuration fields under their field names (the plumbing
  table, autocomp.pipelines.plumbing, says which parameter feeds each) and rebuilds the
  configuration from them by name, `rebuild("render", renderer=renderer, seed=seed, ...)`
  (Google Cloud Pipeline Components' style: a reader sees which input goes where). It takes
  nothing it does not read (tests/pipelines/test_plumbing.py checks both). KFP serializes a
  component from its source text, so its signature is written out.
- Its docstring documents every input (Args) and output (Returns): KFP 2 compiles those into
  the `description` of each input and output definition, which the UI shows; the summary line
  stays in the component's source only (a compiled component has no description field).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autocomp.pipelines.cluster.images import placeholder


def component(kind: str) -> Callable[[Callable[..., Any]], Any]:
    """`@dsl.component` for autocomp: the image of `kind` (core, gpu, caption), resolved at
    build time, and no kfp installed at run time (the images hold it)."""
    from kfp import dsl

    def wrap(func: Callable[..., Any]) -> Any:
        return dsl.component(func, base_image=placeholder(kind), install_kfp_package=False)

    return wrap
