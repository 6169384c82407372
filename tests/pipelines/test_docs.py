"""docs/cluster.md prints the tables the code enforces (the support matrix, the GPU sizes and
cards) verbatim, and the README's cluster section points there."""

from __future__ import annotations

from pathlib import Path

from autocomp.pipelines.cluster import backends, resources

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "cluster.md").read_text()


def test_the_support_matrix_is_the_one_the_code_enforces():
    assert backends.matrix_markdown() in DOC


def test_the_gpu_tables_are_the_ones_the_code_uses():
    tiers = resources.GPU_TIERS_GB
    floors = (f"| size (GB) | {' | '.join(map(str, tiers))} |\n|---|{'---|' * len(tiers)}\n"
              f"| label at least (MiB) | "
              f"{' | '.join(str(resources.tier_floor_mib(t)) for t in tiers)} |\n")  # fmt: skip
    assert floors in DOC
    for card, (gb, mib) in resources.GPU_CARDS.items():
        sizes = ", ".join(map(str, resources.node_tiers(mib)))
        assert f"| {card} | {gb} GB | {mib} | {sizes} |" in DOC


def test_every_feature_of_the_matrix_cites_a_source_the_doc_names():
    for feature in backends.FEATURES:
        path = next(part for part in feature.source.split() if "/" in part and "." in part)
        assert path.rstrip(",;:)").split(":")[0].split("/")[-1] in DOC, feature.key


def test_the_readme_points_to_the_cluster_doc():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## On a cluster (Kubeflow Pipelines)")[1].split("\n## ")[0]
    assert "docs/cluster.md" in section and len(section.splitlines()) < 40
