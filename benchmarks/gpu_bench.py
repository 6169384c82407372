"""GPU throughput at the paper's real shapes, each figure against a baseline in the same run.

Every model is built from its published configuration with random weights (throughput does not
depend on the weights; the GPU machine has no network) and timed on inputs of the paper's
shapes (gpu_shapes.FULL), each step checking the shapes it prints before it times anything:

- score: CLIP ViT-H/14-378 and SigLIP2 Giant per Color N=3 item (1 image + 729 captions):
  autocomp's batches (a causal tower cut to the captions' 22 tokens) against the
  CLIP_benchmark-style loop; Qwen2.5-VL-7B on a 1024 px render (1,369 image tokens, counted
  in the prefix): autocomp's shared prefix (split attention) and the repeated cache it
  replaced, against candidates batched without sharing at the fastest batch of a sweep;
- validate: Grounding DINO (Swin-T, 800 px) and SAM2.1 Hiera-L (1024 px, 3 boxes) at batch 8
  against one image a call; the VQA check (Gemma-3-12B, 3 questions x 19 options per image):
  one prefill per question against one forward per option;
- render: SD3.5 Large, 1024 px, 28 steps, CFG 4.5, 8 prompts a call against one.

Each figure is printed as it is measured (a run cut by the time limit keeps its figures) with
its baseline's rate, the ratio, and the paper's Table 22 rate per A100 where it has one; then
one table and the GPU-hours per 100k concepts against Table 22's. Sections are independent: a
failing one prints its error and the others still run.

  gpu.sh                 # on one H100/H200-class GPU: stops with one line when none is visible
  gpu.sh --dry-run       # every step of the GPU run, shrunken (gpu_shapes.TINY), on the CPU
  gpu.sh --plan          # the shapes as JSON, nothing built
  gpu.sh --tiny          # the shrunken run on whatever device (a GPU smoke test)

Usage: benchmarks/gpu.sh [--dry-run | --plan | --tiny] [--sections score validate render]
       [--budget 20] [--json rows.json] [--dtype auto|bfloat16|float32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).parent))

from gpu_shapes import FULL, PAPER_GPU_HOURS, PAPER_RATE, PAPER_SCALE, TABLE_22, TINY  # noqa: E402

MIN_GPU_GB = 60  # the largest step (SD3.5-L at batch 8 with its three text encoders) needs ~45


class Budget:
    """Timed repetitions within a time box: at least one, then more while time is left."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def median(self, fn: Callable[[], Any], sync: Callable[[], None], most: int = 5) -> float:
        times: list[float] = []
        start = time.perf_counter()
        while not times or (len(times) < most and time.perf_counter() - start < self.seconds):
            t0 = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)


def score(cfg: dict, device: str, dtype: Any, budget: Budget, sync: Callable) -> list[dict]:
    from gpu_steps import contrastive, generative

    return contrastive(cfg, device, dtype, budget, sync) + generative(
        cfg, device, dtype, budget, sync
    )


def validate(cfg: dict, device: str, dtype: Any, budget: Budget, sync: Callable) -> list[dict]:
    from gpu_steps import validate as step

    return step(cfg, device, dtype, budget, sync)


def render(cfg: dict, device: str, dtype: Any, budget: Budget, sync: Callable) -> list[dict]:
    from gpu_steps import render as step

    return step(cfg, device, dtype, budget, sync)


SECTIONS: dict[str, Callable[..., list[dict]]] = {
    "score": score,
    "validate": validate,
    "render": render,
}  # the scoring figures first: the ones a cut run must not lose


# ----------------------------------------------------------------------------- report


def cost_lines(rows: list[dict]) -> list[str]:
    """GPU-hours per 100k concepts for render and validation against Table 22's (A100), and
    per scored model for the paper-scale suite."""
    lines, steps = [], {}
    render_row = next((r for r in rows if r["section"] == "render" and "error" not in r), None)
    validate_row = next((r for r in rows if r.get("what", "").startswith("validation per")), None)
    if render_row:
        steps["render"] = (100_000 / render_row["rate"], TABLE_22["render"])
    if validate_row:
        steps["validate"] = (
            100_000 / validate_row["rate"],
            (100_000, TABLE_22["detect+segment"][1] + TABLE_22["vqa"][1]),
        )
    for name, (seconds, (_, paper_h)) in steps.items():
        ours, paper = seconds / 3600, paper_h * 16
        lines.append(f"per 100k concepts, {name}: {ours:,.1f} GPU-h here vs {paper:,.1f} A100 "
                     f"GPU-h in Table 22 ({paper / ours:.1f}x)")  # fmt: skip
    if len(steps) == 2:
        total = sum(s for s, _ in steps.values()) / 3600
        lines.append(
            f"per 100k concepts, render + validate: {total:,.1f} GPU-h vs the paper's "
            f"{PAPER_GPU_HOURS:.0f} A100 GPU-h in all (caption generation, ~3 GPU-h there, is "
            f"not measured here)"
        )
    for r in rows:
        if "paper_scale_h" in r:
            model = r["what"].split(" per ")[0].split(" shared")[0]
            lines.append(f"scoring the paper-scale suite ({PAPER_SCALE['positives']:,} items, "
                         f"{PAPER_SCALE['captions']:,} captions) with {model}: "
                         f"{r['paper_scale_h']:,.2f} GPU-h (baseline: "
                         f"{r['paper_scale_h'] * r['ratio']:,.2f})")  # fmt: skip
    return lines


def print_row(r: dict) -> None:
    if "error" in r:
        print(f"{r['section']:<9} FAILED: {r['error']}", flush=True)
        return
    paper = f"{r['paper']:,.3f}" if r.get("paper") else "-"
    print(
        f"{r['section']:<9} {r['what']:<66} {r['rate']:>11,.3f} {r['unit']:<9}"
        f"{r['baseline_rate']:>11,.3f} {r['ratio']:>7.2f}x {paper:>9}  "
        f"[baseline: {r['baseline']}] {r['note']}",
        flush=True,
    )


def print_table(rows: list[dict], device_name: str, tiny: bool) -> None:
    sizes = "TINY models (a walk through every step, not figures)" if tiny else "the paper's shapes"
    print(f"\nGPU benchmark on {device_name} (random weights, {sizes})")
    print(f"{'section':<9} {'what':<66} {'rate':>11} {'unit':<9}{'baseline':>11} {'ratio':>8} "
          f"{'Table 22':>9}  (Table 22: the paper's rate per A100)")  # fmt: skip
    for r in rows:
        print_row(r)
    for line in cost_lines(rows):
        print(line)


def plan(cfg: dict, sections: list[str]) -> dict:
    return {"sections": sections, "tiny": cfg is TINY, "config": cfg, "paper_rate": PAPER_RATE}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="every step shrunken, on the CPU")
    parser.add_argument("--plan", action="store_true", help="print the shapes, build nothing")
    parser.add_argument("--tiny", action="store_true", help="the shrunken run on any device")
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    parser.add_argument("--budget", type=float, help="timed seconds per path (20; dry run: 0)")
    parser.add_argument("--device", default=None, help="default: cuda (the dry run: cpu)")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--dtype", default="auto", choices=("auto", "bfloat16", "float32"),
        help="weights and activations (auto: bfloat16, the GPU's, also in the dry run)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    tiny = args.tiny or args.dry_run
    cfg = TINY if tiny else FULL
    if args.plan:
        print(json.dumps(plan(cfg, args.sections), indent=1, default=str))
        return 0
    import torch

    device = args.device or ("cpu" if args.dry_run else "cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu.sh: no CUDA GPU is visible (torch.cuda.is_available() is False); run it on an "
              "H100/H200-class GPU, or `benchmarks/gpu.sh --dry-run` to walk every step on this "
              "CPU", file=sys.stderr)  # fmt: skip
        return 2
    if device.startswith("cuda") and not tiny:
        free_b, _ = torch.cuda.mem_get_info(torch.device(device))
        if free_b < MIN_GPU_GB * 2**30:
            print(f"gpu.sh: {free_b / 2**30:.0f} GiB free on {torch.cuda.get_device_name(0)}, "
                  f"the paper's shapes need {MIN_GPU_GB} GiB (an H100/H200-class GPU)",
                  file=sys.stderr)  # fmt: skip
            return 2
    dtype = torch.float32 if args.dtype == "float32" else torch.bfloat16
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else "CPU"
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = True
    budget = Budget(args.budget if args.budget is not None else (0.0 if args.dry_run else 20.0))
    print(f"gpu_bench on {name}: {'TINY (dry run)' if tiny else 'the paper shapes'}, "
          f"{str(dtype).split('.')[-1]}, sections {' '.join(args.sections)}, "
          f"{budget.seconds:g} s timed per path; torch {torch.__version__}", flush=True)  # fmt: skip
    rows: list[dict] = []
    started = time.perf_counter()
    for section in args.sections:
        t0 = time.perf_counter()
        try:
            new = SECTIONS[section](cfg, device, dtype, budget, sync)
        except SystemExit:
            raise  # a shape check: the figures would not be what they say
        except Exception as exc:  # one failing section must not hide the others' figures
            traceback.print_exc()
            new = [{"section": section, "error": f"{type(exc).__name__}: {exc}"[:300]}]
        for r in new:  # printed as they come: a run cut by the time limit keeps its figures
            print_row(r)
        rows += new
        if args.json:
            args.json.write_text(json.dumps({"device": name, "tiny": tiny, "rows": rows}, indent=1))
        print(f"[{section}: {time.perf_counter() - t0:.0f} s, "
              f"{time.perf_counter() - started:.0f} s in all]", file=sys.stderr, flush=True)  # fmt: skip
    print_table(rows, name, tiny)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
