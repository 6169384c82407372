"""The harness benchmarks `autocomp import` knows, as data: name -> parser, official rule, tie
policy (the rule's), how subsets combine, the release it expects, and its authors' loader.

Adding one: a parser module (importers/<name>.py: `parse(source) -> Parsed`, see
importers/harness.py and importers/winoground.py), a rule in scoring/rules.py RULES if none
fits, an entry below, and golden tests (tests/importers/test_harness_<name>.py: a fixture in the
release's exact format, scored by a transcription of the authors' script and by autocomp).
"""

from __future__ import annotations

from autocomp.importers import eqben, mmvp, spec, winoground
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
    )
}  # fmt: skip
