"""The Kubeflow pipelines. Their definitions ship inside the installed package
(`autocomp.pipelines`), so `autocomp compile/upload/submit/schedule/run` work from any folder and
inside the images; this folder is the entry point users look for:

    from pipelines import generate_benchmark, evaluate_models
"""

from autocomp.pipelines.evaluate_models import evaluate_models
from autocomp.pipelines.generate_benchmark import generate_benchmark

__all__ = ["evaluate_models", "generate_benchmark"]
