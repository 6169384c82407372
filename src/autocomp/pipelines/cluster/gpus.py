"""The GPU sizes and the score pods' host share, read by both the capacity plan
(cluster/capacity.py) and the compiled resources (cluster/resources.py, which re-exports them):
a leaf module, so that neither of the two imports the other back."""

from __future__ import annotations

GPU_TIERS_GB = (16, 24, 40, 48, 80, 141)  # the memory sizes GPUs are sold with
# host memory: a share of the GPU memory (weights pass through it when they load), at least 16 GB
SCORE_HOST = {"cpu_min": 4, "cpu_per_gpu": 4, "memory_gb_min": 16, "memory_per_gpu_memory": 0.75}
