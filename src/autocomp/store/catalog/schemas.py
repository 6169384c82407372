"""The column schemas of the tables autocomp writes, each in one place, with its columns.

Every table also carries its provenance document in the Parquet metadata (store/tables.py). The
score run's folder is store/catalog/runs.py. Sample ids are `<concept_id>/<condition>`
(store/catalog/ids.py).
"""

from __future__ import annotations

import pyarrow as pa

# ----------------------------------------------------------------------------- protocol

CONCEPTS_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),  # content address of the scene: <family>-n<N>-<12 hex>
        ("family", pa.string()),  # task family name
        ("n", pa.int8()),  # number of objects
        ("objects", pa.list_(pa.string())),  # object names, in caption order
        ("attributes", pa.list_(pa.string())),  # attributes (len N) or relations (len N-1)
        ("minimal_caption", pa.string()),  # the template caption
    ]
)
"""concepts table (`autocomp sample`, concepts.parquet): one row per concept."""

CONCEPT_COLUMNS = ("family", "n", "objects", "attributes")
"""The columns of a concept that the negatives stage reads from any input table."""

BENCHMARK_FIELDS = [
    ("caption", pa.string()),  # the positive, normalised like its negatives
    ("caption_rewritten", pa.bool_()),  # caption differs from the input text (articles, case)
    ("protocol", pa.string()),  # paper | strict
    ("swap_negatives", pa.list_(pa.string())),  # N!-1 (paper) captions
    ("swap_arrangements", pa.list_(pa.int32())),  # canonical arrangement index of each
    ("swap_same_scene", pa.list_(pa.bool_())),  # describes the same scene as the positive
    ("swap_in_confusion", pa.list_(pa.int32())),  # position of each in confusion_negatives
    # N^(2N)-1 (attribute families) or N^N (N-1)^(N-1)-1 (relations; paper) captions
    ("confusion_negatives", pa.list_(pa.string())),
    ("confusion_arrangements", pa.list_(pa.int32())),
    ("confusion_same_scene", pa.list_(pa.bool_())),
    ("vary_attribute_negatives", pa.list_(pa.string())),  # N=1 sanity sets, else empty
    ("vary_object_negatives", pa.list_(pa.string())),
    ("swap_chance", pa.float64()),  # 1 / (1 + negatives); null where there are none
    ("confusion_chance", pa.float64()),
    ("vary_attribute_chance", pa.float64()),
    ("vary_object_chance", pa.float64()),
]
"""benchmark table (`autocomp negatives`): every input column (a concepts or curated table;
an input `caption` is kept as `source_caption`), then these candidate-set columns
(protocol/negatives.py, protocol/candidate_columns.py)."""

# ----------------------------------------------------------------------------- generation

CAPTIONS_SCHEMA = pa.schema(
    list(CONCEPTS_SCHEMA)
    + [
        ("contextual_caption", pa.string()),  # the LLM's checked caption; null if dropped
        ("status", pa.string()),  # accepted | dropped | fallback (the Minimal caption)
        ("attempts", pa.int8()),  # tries used
    ]
)
"""captions-*.parquet (`autocomp caption`): the concept columns, then the Contextual caption."""

ATTEMPTS_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),
        ("attempt", pa.int8()),  # 1..max_attempts
        ("seed", pa.int64()),  # the generation seed of this try
        ("reply", pa.string()),  # the LLM's raw reply
        ("caption", pa.string()),  # the reply normalised
        ("verdict", pa.string()),  # the check's verdict (protocol/contextual.py)
        ("detail", pa.string()),  # why it failed, if it did
    ]
)
"""caption_attempts-*.parquet (`autocomp caption`): one row per try of one concept."""

RENDER_SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),  # <concept_id>/<condition>
        ("concept_id", pa.string()),
        ("family", pa.string()),
        ("n", pa.int8()),
        ("objects", pa.list_(pa.string())),
        ("attributes", pa.list_(pa.string())),
        ("condition", pa.string()),  # minimal | contextual
        ("caption", pa.string()),  # the prompt: the condition's caption
        ("caption_status", pa.string()),  # the captions table's status
        ("image", pa.string()),  # PNG path relative to the stage folder
        ("seed", pa.int64()),  # one seed per concept: both conditions share it
        ("renderer", pa.string()),
        ("width", pa.int32()),
        ("height", pa.int32()),
        ("sha256", pa.string()),  # of the PNG file
    ]
)
"""render-*.parquet (`autocomp render`): one row per sample."""

VERDICTS_SCHEMA = pa.schema(
    [
        ("sample_id", pa.string()),
        ("concept_id", pa.string()),
        ("family", pa.string()),
        ("n", pa.int8()),
        ("condition", pa.string()),
        ("check", pa.string()),  # image | objects | background | attributes
        ("step", pa.int8()),  # 1..4, the check's place in the order
        ("outcome", pa.string()),  # pass | fail | skipped | n/a
        ("reason", pa.string()),  # why it failed
        ("detail", pa.string()),  # JSON: counts found, white share, answers...
    ]
)
"""verdicts-*.parquet (`autocomp validate`): one row per sample x check."""

CURATED_FIELDS = [
    ("accepted", pa.bool_()),  # every check passed (or was n/a)
    ("failed_check", pa.string()),  # the first failed check, null if accepted
    ("in_min", pa.bool_()),  # in B_min: an accepted Minimal sample
    ("in_ctx", pa.bool_()),  # in B_ctx: an accepted Contextual sample
    ("paired", pa.bool_()),  # in B_paired: both samples of its concept accepted
]
"""curated.parquet (`autocomp curate`): the render columns, then these."""

SURVIVAL_SCHEMA = pa.schema(
    [
        ("family", pa.string()),
        ("n", pa.int8()),
        ("condition", pa.string()),  # minimal | contextual | both (the caption row)
        ("check", pa.string()),  # a validation check, or caption (kept a Contextual caption)
        ("step", pa.int8()),  # 0 for caption, else the check's step
        ("entered", pa.int64()),  # samples that reached the check
        ("passed", pa.int64()),
        ("survival", pa.float64()),  # passed / entered
        ("cumulative", pa.float64()),  # passed / every sample of the cell
    ]
)
"""survival.parquet (`autocomp curate`): the paper's Table 3, per family x N x condition x
check."""

# ----------------------------------------------------------------------------- store

IMAGE_TYPE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
"""An embedded image (the `datasets` Image feature): the encoded file and its original path; the
`image` column of a published benchmark (store/publish.py)."""

# ----------------------------------------------------------------------------- importers

RELEASE_SAMPLES_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),
        ("sample_id", pa.string()),
        ("family", pa.string()),
        ("n", pa.int8()),
        ("objects", pa.list_(pa.string())),  # mapped onto our vocabulary
        ("attributes", pa.list_(pa.string())),
        ("condition", pa.string()),
        ("caption", pa.string()),  # the release's caption with names mapped
        ("paired", pa.bool_()),
        ("release_row", pa.int64()),  # where the row came from in the release
        ("release_id", pa.string()),
        ("release_objects", pa.list_(pa.string())),  # the release's own names
        ("release_labels", pa.list_(pa.string())),
        ("release_caption", pa.string()),
    ]
)
"""The samples an Auto-Comp release import maps (importers/release.py), before the negatives
stage rebuilds their candidate sets."""

# an imported release sample with its candidate columns: the release's caption kept as it wrote
# it (source_caption) beside the benchmark's own columns
RELEASE_BENCHMARK_SCHEMA = pa.schema(
    [pa.field("source_caption", pa.string()) if f.name == "caption" else f
     for f in RELEASE_SAMPLES_SCHEMA]
    + [pa.field(name, kind) for name, kind in BENCHMARK_FIELDS]
)  # fmt: skip
SUGARCREPE_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),  # sugarcrepe-<category>-<item key>: each item its own
        ("sample_id", pa.string()),  # <concept_id>/contextual
        ("family", pa.string()),  # sugarcrepe-<category>
        ("n", pa.int8()),  # 0
        ("condition", pa.string()),  # contextual
        ("paired", pa.bool_()),
        ("category", pa.string()),
        ("item_id", pa.string()),
        ("filename", pa.string()),  # the COCO image
        ("negative_caption", pa.string()),
        *BENCHMARK_FIELDS,  # one Swap negative (also the Confusion set)
    ]
)
"""A SugarCrepe import's benchmark rows (importers/sugarcrepe.py), without the image column."""

HARNESS_FIELDS = [
    ("benchmark", pa.string()),  # the imported benchmark: winoground, eqben, mmvp-vlm, spec, ...
    ("subset", pa.string()),  # its subset / category / relation (the rule aggregates over it)
    ("group_id", pa.string()),  # the group of images x texts the rule judges together
    ("image_index", pa.int32()),  # this row's image: its row of the group's matrix
    ("group_images", pa.int32()),  # how many images (rows) the group has
    ("query", pa.string()),  # image | text | both: which side queries (scoring/rules.py)
    ("texts", pa.list_(pa.string())),  # the group's texts, in group order (= candidate order)
    ("true_texts", pa.list_(pa.int32())),  # indices of the texts true for this image
    ("image_ref", pa.string()),  # the release's name for the image
    ("meta", pa.string()),  # JSON object: the release's own fields kept (tags, ids)
    ("prompt", pa.string()),  # the question this row asks (VQA: NaturalBench), else null
    ("query_text", pa.string()),  # a text-only row: the text scored against the texts, else null
]
"""The harness columns of an imported benchmark's rows (importers/harness.py): one row per image
of a group, whose candidates (caption, then confusion_negatives) are the group's texts in order, so
a run's scores of row k are row k of the group's score matrix S[image][text]."""
HARNESS_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),  # <benchmark>-<subset>-<group id>: the unit of intervals
        ("sample_id", pa.string()),  # <concept_id>/image-<k>
        ("family", pa.string()),  # <benchmark>-<subset>
        ("n", pa.int8()),  # 0: no Auto-Comp object count
        ("condition", pa.string()),  # contextual
        ("paired", pa.bool_()),
        *HARNESS_FIELDS,
        *BENCHMARK_FIELDS,  # caption = texts[0], confusion_negatives = texts[1:]
    ]
)
"""An imported harness benchmark's rows (importers/harness.py), without the image column."""

# ----------------------------------------------------------------------------- studies, fine-tuning

AUDIT_KEY_SCHEMA = pa.schema(
    [
        ("key", pa.int32()),  # the item's number (annotators' items refer to it)
        ("sample_id", pa.string()),
        ("family", pa.string()),
        ("n", pa.int8()),
        ("condition", pa.string()),
        ("accepted", pa.bool_()),  # the validator's decision on the sample
        ("task", pa.string()),  # confusion | swap | valid
        ("question", pa.string()),  # valid items: objects | attributes | background
        ("prompt", pa.string()),  # what the annotator reads
        ("options", pa.list_(pa.string())),  # in canonical order
        ("correct", pa.string()),
        ("image", pa.string()),  # the blinded image file name
    ]
)
"""key.parquet of a human study (`autocomp audit export`): the answer key, never served."""

SPLIT_SCHEMA = pa.schema(
    [
        ("concept_id", pa.string()),
        ("split", pa.string()),  # train | validation | heldout
    ]
)
"""split.parquet (`autocomp finetune split`): every source concept and its split."""

CURVE_SCHEMA = pa.schema(
    [
        ("step", pa.int32()),
        ("lr", pa.float64()),
        ("loss", pa.float64()),  # the step's training loss; null on an evaluation row
        ("val_swap", pa.float64()),  # validation Swap accuracy; null on a training row
        ("val_confusion", pa.float64()),  # validation Confusion accuracy
    ]
)
"""curve.parquet of a fine-tuning run (autocomp.finetune.train): one row per training step and
one per evaluation."""

# ----------------------------------------------------------------------------- score runs

SCORES_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("sample_id", pa.string()),
        ("candidate_index", pa.int32()),
        ("score", pa.float64()),
        ("tokens", pa.int32()),  # generative: tokens the score sums over; else null
        ("score_type", pa.string()),  # "score", or "choice" (a label's score, --blind choice)
        ("set", pa.string()),  # choice rows: the set, protocol and 1-based option shown
        ("protocol", pa.string()),
        ("option", pa.int32()),
    ]
)
"""scores/part-*.parquet of a score run (store/catalog/runs.py): one row per scored candidate."""

PREDICTIONS_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("sample_id", pa.string()),
        ("family", pa.string()),
        ("n", pa.int8()),
        ("condition", pa.string()),
        ("set", pa.string()),
        ("protocol", pa.string()),
        ("candidates", pa.int32()),
        ("correct", pa.bool_()),
        ("tie", pa.bool_()),
        ("predicted", pa.int32()),
        ("positive_score", pa.float64()),
        ("best_negative_score", pa.float64()),
        ("failed", pa.bool_()),
        ("reason", pa.string()),
        ("truncated", pa.bool_()),
        ("score_type", pa.string()),
        ("options", pa.string()),  # choice: candidate indices in the order shown, "4,0,9"
    ]
)
"""predictions/part-*.parquet of a score run: one row per sample x set x protocol x score type."""

HARNESS_OUTCOME_SCHEMA = pa.schema(
    [
        ("model", pa.string()), ("score_type", pa.string()), ("tie", pa.string()),
        ("benchmark", pa.string()), ("subset", pa.string()), ("group_id", pa.string()),
        ("metric", pa.string()), ("units", pa.int32()), ("correct", pa.int32()),
        ("failed", pa.bool_()),
    ]
)  # fmt: skip
"""analysis/harness.py outcomes: per model, score type, tie policy and group, the units a rule
counts and how many are right."""

HARNESS_METRICS_SCHEMA = pa.schema(
    [
        ("model", pa.string()), ("score_type", pa.string()), ("tie", pa.string()),
        ("benchmark", pa.string()), ("subset", pa.string()), ("metric", pa.string()),
        ("aggregate", pa.string()), ("groups", pa.int64()), ("units", pa.int64()),
        ("accuracy", pa.float64()), ("low", pa.float64()), ("high", pa.float64()),
    ]
)  # fmt: skip
"""the harness_metrics table: a harness benchmark's numbers per subset and the headline, with
intervals."""

HARNESS_UNSCORED_SCHEMA = pa.schema(
    [("model", pa.string()), ("groups", pa.int64()), ("reason", pa.string())]
)
"""the harness_unscored table: models refused and groups that lack scores, with the reason."""

PROFILE_SCHEMA = pa.schema(
    [
        ("model", pa.string()), ("benchmark", pa.string()), ("run", pa.string()),
        ("metric", pa.string()), ("rule", pa.string()), ("accuracy", pa.float64()),
        ("low", pa.float64()), ("high", pa.float64()), ("units", pa.int64()),
    ]
)  # fmt: skip
"""the benchmark_profile table (analysis/profile.py): each model's headline on every compared
benchmark."""

LMMS_EVAL_SCHEMA = pa.schema(
    [
        ("question_id", pa.string()), ("sample_id", pa.string()), ("concept_id", pa.string()),
        ("family", pa.string()), ("n", pa.int32()), ("condition", pa.string()),
        ("set", pa.string()), ("prompt", pa.string()), ("question", pa.string()),
        ("options", pa.list_(pa.string())), ("ids", pa.list_(pa.string())),
        ("candidates", pa.list_(pa.int32())), ("answer", pa.int32()), ("answer_id", pa.string()),
        ("image", IMAGE_TYPE),
    ]
)  # fmt: skip
"""The rows of an lmms-eval task pack's dataset (exports/lmms_eval.py): one question per
benchmark row and set, its options in the seeded order, the answer's position and ID."""

VLMEVALKIT_KEY_SCHEMA = pa.schema(
    [
        ("index", pa.int64()), ("g_index", pa.int64()), ("dataset", pa.string()),
        ("sample_id", pa.string()), ("family", pa.string()), ("n", pa.int8()),
        ("condition", pa.string()), ("set", pa.string()), ("answer", pa.string()),
        ("letters", pa.string()), ("candidates", pa.list_(pa.int32())),
    ]
)  # fmt: skip
"""AutoComp_key.parquet of a VLMEvalKit export (exports/vlmevalkit.py): what each TSV index
asks, so `import vlmevalkit-results` can judge the predictions."""
