"""The KFP components, one per stage. Their definitions ship inside the installed package
(`autocomp.pipelines.definitions.components`), so every verb and every image can use them; this
folder is the entry point users look for. A component names only its image's kind; the image
rule (`image`) resolves it when a pipeline is built for the cluster."""

from autocomp.pipelines.cluster.images import IMAGE_KINDS, image

__all__ = ["IMAGE_KINDS", "image"]
