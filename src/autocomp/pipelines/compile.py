"""Compile the three pipelines to YAML (`autocomp compile`): each built for the cluster now
(images resolved, cluster settings applied), with the `paper` profile's parameter defaults, for
one KFP backend (`backend`: a version, default the newest supported; cluster.backends): the YAML
then holds exactly the Kubernetes fields that backend knows, places GPU steps the way it can, and
records the backend range it was made for (doctor, submit and schedule compare it with the
server). Next to the pipelines: the model-cache warm-up Job, with the same gpu image
(cluster.warmup)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from autocomp.pipelines.plumbing import PIPELINES

WARMUP_FILE = "jobs/model-cache-warmup.yaml"  # beside, not among, the pipeline packages
# the options a dist/ was compiled with (compile_all's own arguments), so a verb that needs the
# same packages with one setting changed (a renderer that needs larger GPUs: generators.py)
# compiles them again as the user did
OPTIONS_FILE = "compile.json"


def load(name: str) -> Any:
    """One pipeline built for the cluster (a kfp GraphComponent)."""
    from autocomp.pipelines.definitions import build

    return build(name, cluster=True)


def _write(path: Path, header: str, docs: list[dict[str, Any]]) -> None:
    """The documents as kfp's compiler writes them (its header comments, sorted keys)."""
    import yaml

    with path.open("w", encoding="utf-8") as handle:
        handle.write(header)
        yaml.dump_all(docs, handle, sort_keys=True)


def _header(text: str) -> str:
    """The comment block kfp's compiler writes above the documents."""
    lines = text.splitlines(keepends=True)
    end = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    return "".join(lines[:end])


def _unplaced(docs: list[dict[str, Any]], scheme: str, labels: tuple, target: Any) -> list[str]:
    """The score classes of a package no card of the scheme holds (compiled unplaced)."""
    from autocomp.pipelines.cluster.placement import place
    from autocomp.pipelines.cluster.plan import score_groups

    executors = docs[0].get("deploymentSpec", {}).get("executors", {})
    return [
        c.name
        for c in score_groups()
        if c.gpus
        and f"exec-score-{c.name}" in executors
        and not place(scheme, c.gpus, c.gpu_gb, target.has("node_affinity"), labels).placed
    ]


def compile_all(
    out: str | Path = "dist",
    backend: str | None = None,
    pull_secrets: tuple[str, ...] = (),
    gpu_sizes: dict[str, int] | None = None,
    tolerations: tuple[str, ...] = (),
    placement: str = "gfd",
    gpu_labels: tuple[str, ...] = (),
) -> dict[str, Path]:
    """Write dist/<pipeline>.yaml for every pipeline (and the warm-up Job); return the paths.
    `gpu_sizes`: step -> GPU size (GB) for steps whose models are parameters (resources.Cluster);
    `tolerations`: taints of the GPU nodes (`key[=value][:effect]`) the GPU steps tolerate;
    `placement`: how GPU steps select their nodes (cluster.placement: gfd, gke, karpenter, eks,
    aks, labels with `gpu_labels` `GB:KEY=VALUE`).
    Refuses, before anything is written, a backend autocomp cannot run on, images nobody can
    pull (cluster.images.check_cluster_images) and any value the cluster would reject or Argo
    would substitute (cluster.validate)."""
    import yaml
    from kfp import compiler

    from autocomp.pipelines.cluster import backends, validate, warmup
    from autocomp.pipelines.cluster import placement as schemes
    from autocomp.pipelines.cluster.images import check_cluster_images, image
    from autocomp.pipelines.cluster.resources import (
        Cluster,
        building,
        check_gpu_sizes,
        parse_toleration,
    )
    from autocomp.store.shards import prepare_folder

    target = backends.target_for(backend)
    sizes = check_gpu_sizes(gpu_sizes or {})
    tolerated = tuple(parse_toleration(t) for t in tolerations)
    for secret in pull_secrets:
        validate.check_dns_subdomain("pull_secrets", secret)
    labels = tuple(schemes.parse_gpu_label(t) for t in gpu_labels)
    scheme = schemes.check_scheme(placement, labels)
    out = prepare_folder(out)  # a folder or nothing yet, in an existing folder
    check_cluster_images()
    written: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    with (
        tempfile.TemporaryDirectory() as work,
        building(Cluster(target, tuple(pull_secrets), sizes, tolerated, scheme, labels)),
    ):
        for name in PIPELINES:
            raw = Path(work, f"{name}.yaml")
            compiler.Compiler().compile(load(name), str(raw))
            text = raw.read_text(encoding="utf-8")
            docs = backends.adapt(list(yaml.safe_load_all(text)), target)
            validate.check_placeholders(docs)
            from autocomp.pipelines.cluster.images import references

            for reference in references(docs[0]):
                validate.check_image("image", reference)
            schemes.stamp(docs[0], scheme, _unplaced(docs, scheme, labels, target))
            written[name] = (_header(text), docs)
    # every pipeline compiled: only now is dist/ touched
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, (header, docs) in written.items():
        paths[name] = out / f"{name}.yaml"
        _write(paths[name], header, docs)
    options = {"backend": backend, "pull_secrets": list(pull_secrets), "gpu_sizes": dict(sizes),
               "tolerations": list(tolerations), "placement": placement,
               "gpu_labels": list(gpu_labels)}  # fmt: skip
    (out / OPTIONS_FILE).write_text(json.dumps(options, indent=1, sort_keys=True) + "\n", "utf-8")
    (out / WARMUP_FILE).parent.mkdir(exist_ok=True)
    (out / WARMUP_FILE).write_text(warmup.render(image("gpu"), tuple(pull_secrets)), "utf-8")
    paths["warmup"] = out / WARMUP_FILE
    return paths
