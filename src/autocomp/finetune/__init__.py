"""Confusion fine-tuning (paper Section 5 "Confusion Fine-Tuning", Appendix A.9, Table 8).

Its configuration is `autocomp.config.FinetuneConfig` (each profile's `finetune`).
- `split`: a seeded concept-disjoint partition of a benchmark (train / validation / held-out);
- `sampler`: K hard negatives per positive, Swap-only or Confusion stratified by error family;
- `losses`: NegCLIP's augmented InfoNCE and its sigmoid (SigLIP) counterpart;
- `checkpoint`: the saved weights and registry entry the unchanged scorer loads;
- `train`: the training loop (gradient caching for large batches, resumable checkpoints) that
  writes an open_clip `local-dir:` checkpoint and a registry entry the unchanged scorer loads.
Heavy libraries (torch, open_clip) are imported inside the functions that need them.
"""
