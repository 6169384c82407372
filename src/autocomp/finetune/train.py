"""The fine-tuning loop: one base model x one negative kind x one seed (paper A.9).

Large batches (2048 / 4096 positives, each with K hard negatives) are trained with gradient
caching (Gao et al. 2021): all embeddings are computed without gradients in micro-batches, the
loss over the whole batch gives the gradient of each embedding, then each micro-batch is encoded
again with gradients and back-propagated with its cached embedding gradients. The gradient is
the one of the full batch (CLIP models have no dropout), so in-batch negatives span the batch.

Output folder (an open_clip `local-dir:` checkpoint, loadable by the unchanged scorer):
    open_clip_config.json, open_clip_model.safetensors  the weights with the best validation
                                                       Confusion accuracy (early stopping)
    registry.yaml    the base entry and the fine-tuned entry (architecture local-dir:<folder>)
    curve.parquet, curve.csv, curve.svg  loss and LR per step, validation Swap / Confusion
                                         accuracy per evaluation
    run.json         config, seed, data, versions, best step, throughput
    state/train_state.pt  the last evaluation's full state: a killed run resumes from it
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from autocomp import __version__
from autocomp.config import FinetuneConfig
from autocomp.errors import UsageError, raised_not_logged, shorten, weights_error
from autocomp.finetune.checkpoint import save_weights, write_registry
from autocomp.finetune.losses import contrastive_loss
from autocomp.finetune.sampler import hard_negatives
from autocomp.scoring.registry import ModelEntry
from autocomp.store.atomic import atomic_path, sweep_stale, write_text
from autocomp.store.catalog.schemas import CURVE_SCHEMA
from autocomp.store.tables import provenance, write_table


@dataclass(frozen=True)
class TrainResult:
    folder: Path
    entry: str  # the fine-tuned model's registry name
    steps: int
    best_step: int
    best_confusion: float
    stopped_early: bool
    steps_per_second: float


def finetuned_name(base: str, kind: str, k: int, seed: int) -> str:
    return f"{base}-ft-{kind}-k{k}-s{seed}"


def _lr_factor(step: int, config: FinetuneConfig) -> float:
    """Linear warm-up to the peak, then cosine decay to zero at `steps`."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    span = max(1, config.steps - config.warmup_steps)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - config.warmup_steps) / span)))


def load_base(entry: ModelEntry, device: str) -> tuple[Any, Any, Any, dict]:
    """(model, preprocess, tokenizer, open_clip model config) of a registered open_clip model,
    weights and preprocessing resolved as the scorer resolves them (the registry's mean, std,
    interpolation and resize mode; QuickGELU forced where the weights need it)."""
    import open_clip

    from autocomp.scoring.contrastive import preprocess_options, resolve_weights
    from autocomp.tiny.scoring import register_open_clip_configs

    if not entry.kind.finetune:
        raise UsageError("model", entry.name, "fine-tuning supports open_clip models only")
    register_open_clip_configs()
    quick_gelu = bool((entry.preprocess or {}).get("quick_gelu"))
    arch = entry.architecture or ""
    if arch.startswith("local-dir:"):
        folder = Path(arch.removeprefix("local-dir:"))
        model_cfg = json.loads((folder / "open_clip_config.json").read_text())["model_cfg"]
    else:
        model_cfg = dict(open_clip.get_model_config(arch) or {})
    if quick_gelu:
        model_cfg["quick_gelu"] = True
    pretrained = resolve_weights(entry)
    try:
        with raised_not_logged():  # the raise below is the one line
            model, _, preprocess = open_clip.create_model_and_transforms(
                arch,
                pretrained=pretrained,
                device=device,
                precision="fp32",
                **preprocess_options(entry),  # train on what is scored (the registry's)
            )
    except (RuntimeError, OSError, ValueError) as exc:  # as the scorer: one line, the way out
        raise weights_error("model", f"{entry.name} ({arch}/{pretrained})", exc) from exc
    return model, preprocess, open_clip.get_tokenizer(arch), model_cfg


def _param_groups(model: Any, weight_decay: float) -> list[dict]:
    """Weight decay on weight matrices only (open_clip's own rule: no decay on gains, biases,
    norms, embeddings of rank 1, logit scale and bias)."""
    decay: list[Any] = []
    plain: list[Any] = []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        skip = p.ndim < 2 or "bn" in name or "ln" in name or "bias" in name or "logit" in name
        (plain if skip else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0}]


class _Encoder:
    """Images and captions to normalised embeddings, in micro-batches, with optional autocast."""

    def __init__(self, model: Any, preprocess: Any, tokenizer: Any, device: str, amp: bool):
        self.model, self.preprocess, self.tokenizer, self.device = (
            model,
            preprocess,
            tokenizer,
            device,
        )
        self.amp = amp

    def autocast(self) -> Any:
        import contextlib

        import torch

        if self.amp:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def pixels(self, images: list[Any]) -> Any:
        import torch

        return torch.stack([self.preprocess(im) for im in images]).to(self.device)

    def tokens(self, texts: list[str]) -> Any:
        return self.tokenizer(texts).to(self.device)

    def images(self, pixels: Any) -> Any:
        with self.autocast():
            return self.model.encode_image(pixels, normalize=True).float()

    def texts(self, tokens: Any) -> Any:
        with self.autocast():
            return self.model.encode_text(tokens, normalize=True).float()


def _load_images(rows: list[dict], root: Path | None) -> list[Any]:
    from autocomp.scoring.images import load_image

    out = []
    for row in rows:
        try:
            out.append(load_image(root, row.get("image")))
        except ValueError as exc:
            raise UsageError("training image", row.get("concept_id"), str(exc)) from None
    return out


def train_step(
    enc: _Encoder, score: str, pixels: Any, texts: list[str], k: int, micro: int
) -> float:
    """One optimizer step's gradients (accumulated into .grad); returns the batch loss."""
    import torch

    model = enc.model
    batch = pixels.shape[0]
    tokens = enc.tokens(texts)  # B positives, then B*K hard negatives (image-major)
    bias = getattr(model, "logit_bias", None)
    if batch <= micro:  # the whole batch fits: plain backward
        img, txt = enc.images(pixels), enc.texts(tokens)
        loss = contrastive_loss(score, img, txt[:batch], txt[batch:], model.logit_scale, bias)
        loss.backward()
        return float(loss.detach())
    with torch.no_grad():
        img = torch.cat([enc.images(pixels[i : i + micro]) for i in range(0, batch, micro)])
        tmicro = micro * (k + 1)
        txt = torch.cat(
            [enc.texts(tokens[i : i + tmicro]) for i in range(0, tokens.shape[0], tmicro)]
        )
    img.requires_grad_(True)
    txt.requires_grad_(True)
    loss = contrastive_loss(score, img, txt[:batch], txt[batch:], model.logit_scale, bias)
    loss.backward()  # gradients of the embeddings, the logit scale and bias
    loss = loss.detach()
    img_grad, txt_grad = img.grad, txt.grad
    if img_grad is None or txt_grad is None:
        raise RuntimeError("the loss reached no embedding gradient")
    for i in range(0, batch, micro):
        enc.images(pixels[i : i + micro]).backward(img_grad[i : i + micro])
    for i in range(0, tokens.shape[0], tmicro):
        enc.texts(tokens[i : i + tmicro]).backward(txt_grad[i : i + tmicro])
    return float(loss)


def evaluate(enc: _Encoder, score: str, rows: list[dict], root: Path | None) -> dict[str, float]:
    """Swap and Confusion accuracy (paper protocol, strict-greater tie rule) on `rows` (images
    decoded 64 at a time)."""
    import torch

    from autocomp.scoring.items import item_from_row, judge

    enc.model.eval()
    correct = {"swap": 0, "confusion": 0}
    with torch.no_grad():
        img = torch.cat(
            [
                enc.images(enc.pixels(_load_images(rows[i : i + 64], root)))
                for i in range(0, len(rows), 64)
            ]
        )
        for i, row in enumerate(rows):
            item = item_from_row(row, i)
            cos = (enc.texts(enc.tokens(item.candidates)) @ img[i]).float()
            if score == "sigmoid":
                cos = enc.model.logit_scale.exp() * cos + enc.model.logit_bias
            values = cos.tolist()
            for name in correct:
                correct[name] += judge(values, item.sets[name])[0]
    enc.model.train()
    return {name: c / len(rows) for name, c in correct.items()}


def _svg_curve(curve: list[dict]) -> str:
    from autocomp.analysis.finetune import svg_curve

    return svg_curve(curve)


def finetune(
    base: ModelEntry,
    train_rows: list[dict],
    val_rows: list[dict],
    kind: str,
    config: FinetuneConfig,
    seed: int,
    out: str | Path,
    images_root: str | Path | None = None,
    device: str | None = None,
    data: dict[str, Any] | None = None,
    progress: Callable[[int], None] | None = None,
    on_checkpoint: Callable[[], None] | None = None,
) -> TrainResult:
    """Fine-tune `base` on the training rows; early stopping on validation Confusion accuracy.
    `on_checkpoint()`: after each evaluation's state is saved (the pipeline's train step
    commits the folder to the store then, so a preempted pod's successor resumes from it)."""
    import numpy as np
    import torch

    if not train_rows or not val_rows:
        raise UsageError(
            "split_file",
            f"{len(train_rows)} train / {len(val_rows)} validation rows",
            "both must be non-empty; use a benchmark with more concepts",
        )
    out = Path(out)
    (out / "state").mkdir(parents=True, exist_ok=True)
    for folder in (out, out / "state"):  # what a killed run was writing
        sweep_stale(folder)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    name = finetuned_name(base.name, kind, config.k, seed)
    record = {
        "base_model": base.name,
        "entry": name,
        "negatives": kind,
        "seed": seed,
        "config": config.record(),
        "data": data or {},
        "autocomp_version": __version__,
    }
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model, preprocess, tokenizer, model_cfg = load_base(base, device)
    model.train()
    amp = config.mixed_precision and device.startswith("cuda")
    enc = _Encoder(model, preprocess, tokenizer, device, amp)
    optimizer = torch.optim.AdamW(
        _param_groups(model, config.weight_decay), lr=config.peak_lr, betas=config.betas
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, config))
    root = Path(images_root) if images_root else None
    batch = min(config.batch_for(base.score), len(train_rows))  # no image twice in a batch
    state_file = out / "state" / "train_state.pt"
    step, curve, best, best_step, bad_evals = 0, [], -1.0, 0, 0
    order: list[int] = []
    if state_file.is_file():
        try:
            state = torch.load(state_file, map_location=device, weights_only=False)
        except Exception as exc:  # cut, damaged or not a torch file: any unpickling error
            fix = (f"does not load ({type(exc).__name__}: {shorten(str(exc), 80)}); delete it "
                   "to start the run over")  # fmt: skip
            raise UsageError("out", str(state_file), fix) from None
        if not isinstance(state, dict) or "record" not in state:
            fix = "is not a fine-tuning state; delete it to start the run over"
            raise UsageError("out", str(state_file), fix)
        if state["record"] != record:
            raise UsageError("out", str(out), "holds another fine-tuning run; use a new folder")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        step, curve, best, best_step = (
            state["step"],
            state["curve"],
            state["best"],
            state["best_step"],
        )
        bad_evals, order = state["bad_evals"], state["order"]

    def checkpoint(metrics: dict[str, float]) -> None:
        nonlocal best, best_step, bad_evals
        curve.append(
            {
                "step": step,
                "lr": scheduler.get_last_lr()[0],
                "loss": None,
                "val_swap": metrics["swap"],
                "val_confusion": metrics["confusion"],
            }
        )
        # The kept weights: the best validation Confusion accuracy, the later one on a tie (more
        # training at no validation cost); patience counts evaluations without a strict gain.
        bad_evals = 0 if metrics["confusion"] > best else bad_evals + 1
        if metrics["confusion"] >= best:
            best, best_step = metrics["confusion"], step
            save_weights(model, model_cfg, out)
        with atomic_path(state_file) as tmp:
            torch.save(
                {
                    "record": record,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "rng": rng.bit_generator.state,
                    "torch_rng": torch.get_rng_state(),
                    "step": step,
                    "curve": curve,
                    "best": best,
                    "best_step": best_step,
                    "bad_evals": bad_evals,
                    "order": order,
                },
                tmp,
            )
        if on_checkpoint:
            on_checkpoint()

    if step == 0 and not curve:  # the pretrained model is the first candidate for "best"
        checkpoint(evaluate(enc, base.score, val_rows, root))
    busy, trained = 0.0, 0  # seconds spent in training steps (evaluations excluded)
    while step < config.steps and bad_evals < config.patience:
        if len(order) < batch:  # a fresh seeded epoch order when the current one runs out
            order = [int(i) for i in rng.permutation(len(train_rows))]
        started = time.perf_counter()
        picks, order = order[:batch], order[batch:]
        texts = [train_rows[i]["caption"] for i in picks]
        texts += [c for i in picks for c, _ in hard_negatives(train_rows[i], kind, config.k, rng)]
        pixels = enc.pixels(_load_images([train_rows[i] for i in picks], root))
        loss = train_step(enc, base.score, pixels, texts, config.k, config.micro_batch)
        lr = scheduler.get_last_lr()[0]
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            model.logit_scale.clamp_(0, math.log(100))
        step += 1
        trained += 1
        busy += time.perf_counter() - started
        curve.append(
            {"step": step, "lr": lr, "loss": loss, "val_swap": None, "val_confusion": None}
        )
        if progress:
            progress(1)
        if step % config.eval_every == 0 or step == config.steps:
            checkpoint(evaluate(enc, base.score, val_rows, root))
    rate = trained / busy if trained and busy > 0 else float("nan")
    stopped_early = step < config.steps
    notes = f"{kind} negatives, K={config.k}, seed {seed}, best step {best_step}"
    entry = write_registry(base, name, out, notes)
    document = provenance("finetune_curve", **record)
    table = pa.Table.from_pylist(curve, CURVE_SCHEMA)
    write_table(table, out / "curve.parquet", document)
    import pyarrow.csv as pacsv

    pacsv.write_csv(table, out / "curve.csv")
    (out / "curve.svg").write_text(_svg_curve(curve))
    result = TrainResult(out, name, step, best_step, best, stopped_early, rate)
    summary = {
        **record,
        "registry_entry": entry,
        "steps_done": step,
        "best_step": best_step,
        "best_val_confusion": best,
        "stopped_early": result.stopped_early,
        "effective_batch": batch,
        "train_rows": len(train_rows),
        "validation_rows": len(val_rows),
        "device": device,
        "steps_per_second": rate,
    }
    write_text(out / "run.json", json.dumps(summary, indent=2, sort_keys=True, default=str))
    return result
