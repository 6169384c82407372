"""What the three pipeline definitions share: one build (`Build`: the cluster's settings and
images, or the local run's bare tasks) and signatures generated from the plumbing table.

A pipeline's body takes its parameters as one mapping (`p["count"]`); `Build.pipeline` gives
it the signature KFP compiles: every parameter of autocomp.pipelines.plumbing with its KFP
type, the `paper` profile's value as its default and its help as its description.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from autocomp.pipelines import plumbing
from autocomp.pipelines.cluster.images import placeholder, resolve
from autocomp.pipelines.cluster.resources import ScoreClass, configure

Body = Callable[[Mapping[str, Any]], Any]


def signature(pipeline: str, returns: Any) -> inspect.Signature:
    """The pipeline's signature: its parameters in table order, typed, with the paper
    profile's defaults (a required parameter has none)."""
    defaults = plumbing.defaults(pipeline)
    return inspect.Signature(
        [
            inspect.Parameter(
                p.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,  # KFP calls a pipeline positionally
                annotation=plumbing.kfp_type(p),
                default=(
                    inspect.Parameter.empty
                    if isinstance(defaults[p.name], plumbing.Required)
                    else defaults[p.name]
                ),
            )
            for p in plumbing.parameters(pipeline)
        ],
        return_annotation=returns,
    )


def graph(
    name: str,
    description: str,
    parameters: Sequence[inspect.Parameter],
    returns: Any,
    helps: Mapping[str, str],
    body: Body,
) -> Any:
    """A KFP pipeline (a graph component) over `body`, with the given signature; `helps`:
    each parameter's description (KFP reads them from the docstring's Args)."""
    from kfp import dsl

    made = inspect.Signature(list(parameters), return_annotation=returns)

    def run(*args: Any, **kwargs: Any) -> Any:
        bound = made.bind(*args, **kwargs)
        bound.apply_defaults()
        return body(bound.arguments)

    run.__name__ = run.__qualname__ = name.replace("-", "_")
    run.__signature__ = made  # type: ignore[attr-defined]
    lines = [f"    {key}: {text}" for key, text in helps.items() if key in made.parameters]
    run.__doc__ = f"{description}\n\nArgs:\n" + "\n".join(lines) + "\n"
    return dsl.pipeline(name=name, description=description)(run)


class Build:
    """One build of a pipeline. cluster=True (compile, the default): every component's image
    resolved (cluster.images) and every step's cluster settings applied (cluster.resources);
    cluster=False (the local run): neither (kfp.local runs each task in this Python)."""

    def __init__(self, cluster: bool = True) -> None:
        self.cluster = cluster
        self.made: dict[tuple[int, str | None], Any] = {}

    def component(
        self, component: Any, name: str | None = None, image: tuple[str, str] | None = None
    ) -> Any:
        """The component as this build uses it: a copy with its image resolved (cluster) and,
        with `name`, a name of its own (its executor then carries only its own settings); with
        `image` (kind, variant; only with `name`), that image instead of the one it declares
        (a score class whose engine lives in another image: gpus.SCORE_IMAGES)."""
        key = (id(component), name)
        if key not in self.made:
            made = component
            if self.cluster or name:
                made = copy.deepcopy(component)
                container = made.component_spec.implementation.container
                if name:
                    made.component_spec.name = name
                    if image is not None:
                        container.image = placeholder(*image)
                if self.cluster:
                    container.image = resolve(container.image)
            self.made[key] = made
        return self.made[key]

    def step(
        self,
        component: Any,
        step: str,
        /,
        *,
        display: str | None = None,
        score: ScoreClass | None = None,
        component_name: str | None = None,
        image: tuple[str, str] | None = None,
        **inputs: Any,
    ) -> Any:
        """One task: `component` called with `inputs`, given the settings of `step`
        (cluster.resources.STEPS; `score`: a score class's), shown as `display`; `image`: see
        `component`."""
        task = configure(
            self.component(component, component_name, image)(**inputs),
            step,
            score=score,
            cluster=self.cluster,
        )
        if display:
            task.set_display_name(display)
        return task

    def pipeline(self, pipeline: str, description: str, returns: Any) -> Callable[[Body], Any]:
        """The decorator of a pipeline's body: KFP's pipeline with the signature and the
        parameter descriptions of the plumbing table."""
        helps = {p.name: p.help for p in plumbing.parameters(pipeline)}
        parameters = list(signature(pipeline, returns).parameters.values())

        def wrap(body: Body) -> Any:
            name = plumbing.DISPLAY_NAMES[pipeline]
            return graph(name, description, parameters, returns, helps, body)

        return wrap
