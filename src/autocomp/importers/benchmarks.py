"""The harness benchmarks `autocomp import` knows, as data: name -> parser, official rule, tie
policy (the rule's), how subsets combine, the release it expects, and its authors' loader.

Adding one: a parser module (importers/<name>.py: `parse(source) -> Parsed`, see
importers/harness.py and importers/winoground.py), a rule in scoring/rules.py RULES if none
fits, an entry below, and golden tests (tests/importers/test_harness_<name>.py: a fixture in the
release's exact format, scored by a transcription of the authors' script and by autocomp).
"""

from __future__ import annotations

from autocomp.importers import (
    aro,
    crepe,
    eqben,
    mmvp,
    naturalbench,
    order,
    scpp,
    spec,
    winoground,
)
from autocomp.importers.harness import HarnessBenchmark

HARNESS: dict[str, HarnessBenchmark] = {
    b.name: b
    for b in (
        HarnessBenchmark(
            name=winoground.NAME, parse=winoground.parse, rule="text-image-group",
            aggregate="micro", expects=winoground.EXPECTS,
            images="Winoground's images folder (data/images.zip extracted: ex_0_img_0.png, ...)",
            loader="huggingface.co/datasets/facebook/winoground winoground.py; scoring: the "
            "dataset card's text_correct / image_correct / group_correct",
            about="Imported by autocomp from Winoground (facebook/winoground): 400 groups of two "
            "images x two captions, scored by its text, image and group scores.",
        ),
        HarnessBenchmark(
            name=eqben.NAME, parse=eqben.parse, rule="text-image-group", aggregate="macro",
            expects=eqben.EXPECTS, images="EqBen's image root (the folder its annotations' "
            "image0 / image1 paths are under)",
            loader="github.com/Wangt-CN/EqBen src/eqben/eqben_utils.py (EqBenKubric, EqBenSD, "
            "EqBenGEBC, EqBenYoucook2, EqBenAG); scoring: src/eqben/eqben_acc.py cal_wino_score",
            about="Imported by autocomp from EqBen: pairs of two images x two captions per "
            "subset, scored by the Winoground text, image and group scores.",
        ),
        HarnessBenchmark(
            name=mmvp.NAME, parse=mmvp.parse, rule="pair", aggregate="macro",
            expects=mmvp.EXPECTS, images="", loader="github.com/tsb0601/MMVP "
            "scripts/evaluate_vlm.py (Questions.csv, 'MLLM_VLM Images/<type>/<qid>.jpg')",
            about="Imported by autocomp from MMVP-VLM: 135 pairs of two images x two "
            "statements in 9 categories, scored by pair accuracy per category.",
        ),
        HarnessBenchmark(
            name=spec.NAME, parse=spec.parse, rule="retrieval", aggregate="macro",
            expects=spec.EXPECTS, images="", loader="github.com/wjpoom/SPEC "
            "spec/dataset.py (image2text.json, text2image.json per subset); scoring: "
            "spec/models/clip_wrapper.py i2t_evaluate / t2i_evaluate",
            about="Imported by autocomp from SPEC: per subset, image-to-text and text-to-image "
            "retrieval among candidates differing in one attribute.",
        ),
        HarnessBenchmark(
            name="aro-vg-relation", parse=aro.parse_relation, rule="image-to-text",
            aggregate="macro", expects=aro.EXPECTS,
            images="ARO's images/ folder (vgr_vga_images.zip extracted)",
            loader="github.com/mertyg/vision-language-models-are-bows dataset_zoo/"
            "aro_datasets.py VG_Relation (crop, evaluate_scores) and the notebook's macro",
            about="Imported by autocomp from ARO VG-Relation: one cropped Visual Genome region x "
            "[true, false] caption per item, macro accuracy over the non-symmetric relations.",
        ),
        HarnessBenchmark(
            name="aro-vg-attribution", parse=aro.parse_attribution, rule="image-to-text",
            aggregate="macro", expects=aro.EXPECTS,
            images="ARO's images/ folder (vgr_vga_images.zip extracted)",
            loader="github.com/mertyg/vision-language-models-are-bows dataset_zoo/"
            "aro_datasets.py VG_Attribution (crop, evaluate_scores: pairs of 25+ items)",
            about="Imported by autocomp from ARO VG-Attribution: one cropped Visual Genome "
            "region x [true, false] caption per item, macro accuracy over attribute pairs "
            "with at least 25 items.",
        ),
        HarnessBenchmark(
            name="aro-coco-order", parse=order.parse, rule="image-to-text-first",
            aggregate="micro", expects=order.EXPECTS,
            images="the COCO 2014 root (the folder holding val2014/)",
            loader="github.com/mertyg/vision-language-models-are-bows dataset_zoo/"
            "aro_datasets.py COCO_Order, perturbations.py TextShuffler",
            about="Imported by autocomp from ARO COCO-Order: each caption against four word-order "
            "perturbations, drawn once at import under a recorded seed; Precision@1.",
        ),
        HarnessBenchmark(
            name="aro-flickr-order", parse=order.parse, rule="image-to-text-first",
            aggregate="micro", expects=order.EXPECTS,
            images="the Flickr30k root (the folder holding flickr30k-images/)",
            loader="github.com/mertyg/vision-language-models-are-bows dataset_zoo/"
            "aro_datasets.py Flickr30k_Order, perturbations.py TextShuffler",
            about="Imported by autocomp from ARO Flickr30k-Order: each caption against four "
            "word-order perturbations, drawn once at import under a recorded seed; Precision@1.",
        ),
        HarnessBenchmark(
            name="sugarcrepe-pp", parse=scpp.parse, rule="two-positives", aggregate="micro",
            expects=scpp.EXPECTS, images="the COCO val2017 folder SugarCrepe++'s items name",
            loader="github.com/Sri-Harsha/scpp VLMs/test_Variants_CLIP.py (data/<subset>.json)",
            about="Imported by autocomp from SugarCrepe++: one COCO image x [P1, P2, negative] "
            "per item, scored by ITT, P1-Neg and P2-Neg per subset.",
        ),
        HarnessBenchmark(
            name="sugarcrepe-pp-tot", parse=scpp.parse_text_only, rule="text-only",
            aggregate="micro", expects=scpp.EXPECTS,
            images="the COCO val2017 folder SugarCrepe++'s items name",
            loader="github.com/Sri-Harsha/scpp VLMs/test_Variants_CLIP.py (data/<subset>.json)",
            about="Imported by autocomp from SugarCrepe++: the text-only task, P1 and P2 each "
            "compared with [P1, P2, negative] by text-text cosine, per subset.",
        ),
        HarnessBenchmark(
            name="crepe", parse=crepe.parse, rule="recall-at-k", aggregate="micro",
            expects=crepe.EXPECTS,
            images="the Visual Genome folder holding VG_100K/ and VG_100K_2/",
            loader="github.com/RAIVNLab/CREPE crepe_eval_utils.py (BaseCsvDataset, "
            "get_one2many_rank, get_one2many_metrics), crepe_compo_eval_open_clip.py",
            about="Imported by autocomp from CREPE: one cropped Visual Genome region x [caption, "
            "hard negatives] per row, recall@1/3/5/10 per retrieval set.",
        ),
        HarnessBenchmark(
            name="naturalbench", parse=naturalbench.parse, rule="yes-no-groups",
            aggregate="micro", expects=naturalbench.EXPECTS, images="",
            loader="github.com/Baiqi-Li/NaturalBench naturalbench_vqa.py (get_scores); the "
            "dataset BaiqiL/NaturalBench",
            about="Imported by autocomp from NaturalBench: two images x two questions per group, "
            "answered yes/no (or A/B) by option likelihood; Acc, Q-Acc, I-Acc, G-Acc.",
        ),
    )
}  # fmt: skip
