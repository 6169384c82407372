"""Auto-Comp as an lmms-eval task pack (`lmms_eval --include_path <out> --tasks autocomp`).

Layout, from lmms-eval's source (EvolvingLMMs-Lab/lmms-eval, lmms_eval/api/task.py):
`TaskConfig` (task, tag, dataset_path, test_split, output_type, doc_to_*, process_results,
metric_list, target_delimiter, cluster_key, score_key, metadata; lines 102-150) is read from each
YAML of the --include_path folder, `!function utils.NAME` naming a function of the folder's
utils.py; `ConfigurableTask.download` (line 963) calls `datasets.load_dataset(path=dataset_path)`,
so each family's dataset is a local folder of Parquet files in the Hugging Face layout
(data/<family>/test-00000-of-00001.parquet, the image column typed Image), found by its absolute
path (re-export after moving the folder). `construct_requests` (line 1521) asks a
`multiple_choice` task's model for the log-likelihood of f"{target_delimiter}{choice}" after the
context; the YAML sets the delimiter to "" so each continuation is the caption exactly.
`cluster_key: concept_id` makes its clustered standard error (evaluator_utils.py,
calculate_clt_aggregate_metric) treat a concept's questions as one cluster.

Per family two tasks, both tagged `autocomp`:
- autocomp_<family>_mc (`multiple_choice`): the model's log-likelihood of each caption after
  the prompt; the choice is the highest (lmms-eval's rule); a model class without likelihood
  scoring raises there (lmms-eval's qwen2_5_vl, internvl3, gemma3, vllm).
- autocomp_<family>_gen (`generate_until`): one prompt lists the options, each after an ID
  "(1)".."(K)" (equal width), and asks for the ID; the reply's first ID that names an option is
  the choice, else a reply equal to an option's caption, else none (wrong).
The option order is the seeded draw of exports/questions.py. utils.py is code only: every
caption, prompt and ID is read from the dataset's rows (never embedded in code).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from autocomp.exports.questions import Question, slug
from autocomp.scoring.choice import ids
from autocomp.store.catalog.schemas import LMMS_EVAL_SCHEMA
from autocomp.store.publish import hf_schema

MC_PROMPT = "Describe this image in one sentence."  # the likelihood task's context
GEN_PROMPT = (
    "Which caption describes the image? The captions, each after an ID in parentheses:\n"
    "{options}\nReply with the ID of the caption in parentheses and nothing else."
)

UTILS = '''"""lmms-eval functions of the Auto-Comp task pack (`autocomp export lmms-eval`).
Code only: every caption, prompt and ID comes from the dataset's rows."""

import ast
import io
import re

from PIL import Image


def doc_to_visual(doc):
    image = doc["image"]
    if isinstance(image, dict):
        image = Image.open(io.BytesIO(image["bytes"]))
    return [image.convert("RGB")]


def doc_to_text_mc(doc, lmms_eval_specific_kwargs=None):
    return doc["prompt"]


def doc_to_text_gen(doc, lmms_eval_specific_kwargs=None):
    return doc["question"]


def doc_to_choice(doc):
    return list(doc["options"])


def _result(doc, choice, **extra):
    return {
        "score": float(choice == doc["answer"]), "choice": choice,
        "concept_id": doc["concept_id"], "sample_id": doc["sample_id"], "set": doc["set"],
        **extra,
    }


def _ll(result):
    """An option's value: lmms-eval passes (ll, is_greedy), at times as its repr."""
    if isinstance(result, str):
        result = ast.literal_eval(result)
    return float(result[0] if isinstance(result, (tuple, list)) else result)


def process_results_mc(doc, results):
    """The highest log-likelihood is the choice (lmms-eval's own rule; the first on a tie)."""
    lls = [_ll(r) for r in results]
    best = max(range(len(lls)), key=lambda i: (lls[i], -i))
    return {"autocomp_acc": _result(doc, best, lls=[float(x) for x in lls])}


def parse_reply(doc, reply):
    """The option a reply names: its first ID that is an option's, else a reply equal to an
    option's caption (case and surrounding space ignored), else -1."""
    ids = list(doc["ids"])
    for found in re.findall(r"\\(\\s*\\d+\\s*\\)", reply):
        number = re.sub(r"\\s", "", found)
        for i, option_id in enumerate(ids):
            if int(number[1:-1]) == int(option_id[1:-1]):
                return i
    text = reply.strip().casefold()
    for i, caption in enumerate(doc["options"]):
        if caption.strip().casefold() == text:
            return i
    return -1


def process_results_gen(doc, results):
    reply = results[0] if results else ""
    return {"autocomp_acc": _result(doc, parse_reply(doc, reply), reply=reply)}


def mean_score(items):
    scores = [x["score"] if isinstance(x, dict) else float(x) for x in items]
    return sum(scores) / len(scores) if scores else 0.0
'''


def _q(value: str) -> str:
    """A YAML scalar that reads back as `value` exactly (JSON strings are YAML flow scalars)."""
    return json.dumps(value, ensure_ascii=False)


def task_yaml(task: str, variant: str, dataset: Path, family: str, meta: dict[str, Any]) -> str:
    """One task's YAML (variant: mc or gen)."""
    lines = [
        f"task: {_q(task)}",
        "tag:",
        "  - autocomp",
        f"  - {_q('autocomp_' + variant)}",
        f"task_alias: {_q(f'Auto-Comp {family} ({variant})')}",
        f"dataset_path: {_q(str(dataset))}",
        "test_split: test",
        "doc_to_visual: !function utils.doc_to_visual",
        "cluster_key: concept_id",
        "score_key: score",
    ]
    if variant == "mc":
        lines += [
            "output_type: multiple_choice",
            "doc_to_text: !function utils.doc_to_text_mc",
            "doc_to_choice: !function utils.doc_to_choice",
            "doc_to_target: answer",
            'target_delimiter: ""',
            "process_results: !function utils.process_results_mc",
        ]
    else:
        lines += [
            "output_type: generate_until",
            "doc_to_text: !function utils.doc_to_text_gen",
            "doc_to_target: answer_id",
            "generation_kwargs:",
            "  max_new_tokens: 16",
            "  temperature: 0",
            "  do_sample: false",
            "  num_beams: 1",
            "process_results: !function utils.process_results_gen",
        ]
    lines += [
        "metric_list:",
        "  - metric: autocomp_acc",
        "    aggregation: !function utils.mean_score",
        "    higher_is_better: true",
        "metadata:",
        "  version: 1.0",
        f"  autocomp: {_q(json.dumps(meta, sort_keys=True))}",
    ]
    return "\n".join(lines) + "\n"


def _row(q: Question) -> dict[str, Any]:
    shown = ids(len(q.options))
    listing = "\n".join(f"{i} {caption}" for i, caption in zip(shown, q.options))
    return {
        "question_id": q.qid, "sample_id": q.sample_id, "concept_id": q.concept_id,
        "family": q.family, "n": q.n, "condition": q.condition, "set": q.set_name,
        "prompt": MC_PROMPT, "question": GEN_PROMPT.format(options=listing),
        "options": q.options, "ids": shown, "candidates": q.candidates, "answer": q.answer,
        "answer_id": shown[q.answer], "image": {"bytes": q.image, "path": q.image_name},
    }  # fmt: skip


def write(
    questions: list[Question], tmp: Path, final: Path, meta: dict[str, Any]
) -> dict[str, Any]:
    """The pack in `tmp` (renamed to `final` by the caller; the YAMLs name `final`'s data)."""
    families: dict[str, list[Question]] = {}
    for q in questions:
        families.setdefault(q.family, []).append(q)
    tasks = []
    for family, group in sorted(families.items()):
        name = slug(family)
        table = pa.Table.from_pylist([_row(q) for q in group], LMMS_EVAL_SCHEMA)
        path = tmp / "data" / name / "test-00000-of-00001.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(table.replace_schema_metadata(hf_schema(LMMS_EVAL_SCHEMA).metadata), path)
        for variant in ("mc", "gen"):
            task = f"autocomp_{name}_{variant}"
            dataset = final.resolve() / "data" / name
            (tmp / f"{task}.yaml").write_text(task_yaml(task, variant, dataset, family, meta))
            tasks.append(task)
    (tmp / "utils.py").write_text(UTILS)
    return {"tasks": tasks, "questions": len(questions)}
