"""Render and validate throughput (images/s), for the cost model in docs/generation.md.

Render: the chosen text-to-image model at batch 1 in float32 (the naive baseline) and at
`--batch` in the registry dtype (bf16 on GPU), same prompts and seeds; prints images/s and the
ratio. Validate: per-image cost of each check (detector per class query, SAM2 per Minimal image,
VQA per question with shared-prefix option scoring, and the naive VQA that runs one forward per
option), then the time per 100k images of the cheapest-first order against running every check
on every image, using the paper's survival rates (Table 3 / A.12: 53 % rejected by the object
check).

`--random-weights` builds every model from its config with random weights (configs and
tokenizers come from the hub id or folder; weights are never read): throughput does not depend on
the weights, so full-size architectures can be measured on a GPU without downloading them.
Defaults are the tiny models (CPU, offline).

Usage:
  python benchmarks/generation_throughput.py                        # tiny, CPU
  python benchmarks/generation_throughput.py --profile paper --random-weights --device cuda \
      --batch 16 --images 32
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("AUTOCOMP_CACHE", tempfile.mkdtemp(prefix="autocomp-tiny-"))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

from autocomp.config import get_profile  # noqa: E402
from autocomp.generation import checks  # noqa: E402
from autocomp.generation.registry import get_generation_model  # noqa: E402
from autocomp.protocol.concepts import sample_concepts  # noqa: E402
from autocomp.protocol.family import load_family  # noqa: E402

PAPER_OBJECT_SURVIVAL = 0.47  # A.12: ~47,000 of 100,000 images reach the VQA check


def render_rate(args, dtype_name: str, batch: int, prompts, seeds) -> float:
    import torch

    from autocomp.generation.render import DiffusersRenderer

    entry = get_generation_model("renderer", args.renderer)
    dtype = getattr(torch, dtype_name) if args.device != "cpu" else torch.float32
    renderer = DiffusersRenderer(entry, device=args.device, random_weights=args.random_weights)
    renderer.pipe.to(args.device, dtype)
    if args.steps:
        renderer.settings["num_inference_steps"] = args.steps
    renderer.render(prompts[:1], seeds[:1])  # warm-up
    _sync(args.device)
    start = time.perf_counter()
    for i in range(0, len(prompts), batch):
        renderer.render(prompts[i : i + batch], seeds[i : i + batch])
    _sync(args.device)
    return len(prompts) / (time.perf_counter() - start)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def validation_costs(args, images, concepts, family) -> dict[str, float]:
    """Seconds per unit of each check (per class query, per Minimal image, per question)."""
    from autocomp.generation.detection import Detector, Segmenter
    from autocomp.generation.vqa import VqaJudge
    from autocomp.scoring import load_scorer

    names = get_profile(args.profile).roles()
    det_entry = get_generation_model("detector", names["detector"])
    seg_entry = get_generation_model("segmenter", names["segmenter"])
    detector = Detector(det_entry, device=args.device, random_weights=args.random_weights)
    segmenter = Segmenter(seg_entry, device=args.device, random_weights=args.random_weights)
    costs = {}
    pairs = [(im, c.objects[0]) for im, c in zip(images, concepts)]
    detector.detect(pairs[:1])
    start = time.perf_counter()
    for i in range(0, len(pairs), args.batch):
        detector.detect(pairs[i : i + args.batch])
    costs["detector per class query"] = (time.perf_counter() - start) / len(pairs)
    boxes = [[4, 4, images[0].width // 2, images[0].height // 2]]
    segmenter.union_mask(images[0], boxes)
    start = time.perf_counter()
    for image in images:
        segmenter.union_mask(image, boxes)
    costs["segmenter per image"] = (time.perf_counter() - start) / len(images)
    for label, naive in (
        ("VQA per question (shared prefix)", False),
        ("VQA per question (naive)", True),
    ):
        scorer = load_scorer(names["vqa"], device=args.device, naive=naive,
                             random_weights=args.random_weights)  # fmt: skip
        judge = VqaJudge(names["vqa"], scorer=scorer)
        asked = [(f"i{k}", im, checks.questions(family, c.objects, c.labels)[0])
                 for k, (im, c) in enumerate(zip(images, concepts))]  # fmt: skip
        judge.option_scores(asked[:1])
        start = time.perf_counter()
        judge.option_scores(asked)
        costs[label] = (time.perf_counter() - start) / len(asked)
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--renderer", default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--images", type=int, default=8)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=None, help="override inference steps")
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--random-weights", action="store_true")
    args = parser.parse_args()
    args.renderer = args.renderer or get_profile(args.profile).roles()["renderer"]
    entry = get_generation_model("renderer", args.renderer)
    family = load_family("color")
    concepts = sample_concepts(family, args.n, args.images, seed=0)
    from autocomp.protocol.minimal import minimal_caption

    prompts = [minimal_caption(family, c.objects, c.labels) for c in concepts]
    seeds = list(range(len(prompts)))
    print(f"render: {args.renderer} ({entry.weights}{', random weights' if args.random_weights else ''}), "
          f"{args.images} images, settings {entry.settings}, device {args.device}")  # fmt: skip
    naive = render_rate(args, "float32", 1, prompts, seeds)
    fast = render_rate(args, entry.dtype, args.batch, prompts, seeds)
    print(f"  naive (float32, batch 1):        {naive:8.3f} images/s")
    print(
        f"  batched ({entry.dtype}, batch {args.batch}):   {fast:8.3f} images/s   x{fast / naive:.2f}"
    )

    from autocomp.generation.render import DiffusersRenderer

    renderer = DiffusersRenderer(entry, device=args.device, random_weights=args.random_weights)
    images = renderer.render(prompts, seeds)
    costs = validation_costs(args, images, concepts, family)
    print(f"validate ({args.profile} profile, Color N={args.n}, batch {args.batch}):")
    for label, seconds in costs.items():
        print(f"  {label:36s} {1000 * seconds:9.2f} ms")
    n, questions = args.n, args.n
    det = n * costs["detector per class query"]
    seg = 0.5 * costs["segmenter per image"]  # Minimal images only: half of all samples
    vqa = questions * costs["VQA per question (shared prefix)"]
    vqa_naive = questions * costs["VQA per question (naive)"]
    first = det + seg + PAPER_OBJECT_SURVIVAL * vqa
    every = det + seg + vqa
    naive_all = det + seg + vqa_naive
    hours = 100_000 / 3600
    print("per 100k images (one worker), with the paper's 47 % object-check survival:")
    print(f"  cheapest first, shared-prefix VQA:   {first * hours:9.3f} h")
    print(f"  every check on every image:          {every * hours:9.3f} h   x{every / first:.2f}")
    print(
        f"  every check, naive VQA:              {naive_all * hours:9.3f} h   x{naive_all / first:.2f}"
    )


if __name__ == "__main__":
    main()
