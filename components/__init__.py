"""The KFP components, one per stage. Their definitions ship inside the installed package
(`autocomp.pipelines.components`), so every verb and every image can use them; this folder is
the entry point users look for."""

from autocomp.pipelines.components import IMAGE_KINDS, image

__all__ = ["IMAGE_KINDS", "image"]
