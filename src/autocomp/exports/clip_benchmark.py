"""Auto-Comp for CLIP_benchmark's `image_caption_selection` metric.

From CLIP_benchmark's source (LAION-AI/CLIP_benchmark at 48de38c):
clip_benchmark/metrics/image_caption_selection.py `evaluate(model, dataloader, tokenizer,
device, amp)` takes batches of (images, per-instance caption lists) as
datasets/builder.py `image_captions_collate_fn` (line 814) makes them, and counts an instance's
text score right when the image's most similar caption (torch argmax: the first on a tie) is
caption 0; every instance of a batch must have the same number of captions (`view(B, nt, -1)`).
Its SugarCrepe reader (datasets/sugar_crepe.py) reads one JSON of {id: {filename, caption,
negative_caption}} and the images beside it, one negative each; Auto-Comp sets have several.

Written: images/<number>.<ext>, and per family, N and set one annotation file
<family>/n<N>_<set>_<K>.json (K captions per item: the metric needs one count per
batch) of {id: {filename, caption, negative_captions, sample_id}} (the
negatives in the seeded order of exports/questions.py; the positive is caption 0, as the metric
requires), and autocomp_dataset.py, a torch Dataset over one annotation file that returns
(image, [caption, *negative_captions]) as SugarCrepe's does (code only: every caption is read
from the JSON). With amp off, the metric's `text_acc` on a file is autocomp's accuracy on that
family, N and set for the same open_clip model, except that a tie at the top counts right there
and wrong in autocomp (items.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autocomp.exports.questions import Question, slug

DATASET_PY = '''"""A torch Dataset over one Auto-Comp annotation file for CLIP_benchmark's
image_caption_selection metric (written by `autocomp export clip-benchmark`)."""

import json
import os

from PIL import Image
from torch.utils.data import Dataset


class AutoCompCaptions(Dataset):
    """(image, [caption, *negative_captions]) per item, as CLIP_benchmark's SugarCrepe."""

    def __init__(self, ann_file, transform=None):
        with open(ann_file, encoding="utf-8") as handle:
            self.ann = json.load(handle)
        export = os.path.dirname(os.path.dirname(os.path.abspath(ann_file)))
        self.root = os.path.join(export, "images")
        self.keys = list(self.ann)
        self.transform = transform

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        data = self.ann[self.keys[i]]
        image = Image.open(os.path.join(self.root, data["filename"])).convert("RGB")
        if self.transform is not None:
            image = self.transform(image)
        return image, [data["caption"], *data["negative_captions"]]
'''


def write(
    questions: list[Question], tmp: Path, final: Path, meta: dict[str, Any]
) -> dict[str, Any]:
    """Images, annotation files and the Dataset in `tmp`."""
    del final, meta
    (tmp / "images").mkdir()
    files: dict[str, dict[str, Any]] = {}
    written: dict[str, str] = {}
    for q in questions:
        name = written.get(q.sample_id)
        if name is None:
            name = f"{len(written):06d}{Path(q.image_name).suffix or '.png'}"
            (tmp / "images" / name).write_bytes(q.image)
            written[q.sample_id] = name
        negatives = [o for i, o in enumerate(q.options) if i != q.answer]
        rel = f"{slug(q.family)}/n{q.n}_{q.set_name}_{len(q.options)}.json"
        files.setdefault(rel, {})[str(q.number)] = {
            "filename": name, "caption": q.options[q.answer],
            "negative_captions": negatives, "sample_id": q.sample_id,
        }  # fmt: skip
    for rel, ann in files.items():
        path = tmp / rel
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(ann, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (tmp / "autocomp_dataset.py").write_text(DATASET_PY)
    return {"annotation_files": sorted(files), "images": len(written), "questions": len(questions)}
