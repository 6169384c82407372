"""The validation checks on hand-made inputs: images, detections, backgrounds, questions."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw

from autocomp.generation import checks

# ----------------------------------------------------------------------------- images


def _save(tmp_path, image, name="x.png"):
    path = tmp_path / name
    image.save(path)
    return path


def test_rgb_image_is_taken_as_is(tmp_path):
    image, note = checks.normalize_image(_save(tmp_path, Image.new("RGB", (8, 8), "red")))
    assert image.mode == "RGB" and note == ""


@pytest.mark.parametrize("mode", ["L", "P", "CMYK", "1"])
def test_other_8bit_modes_are_converted_and_noted(tmp_path, mode):
    name = "x.jpg" if mode == "CMYK" else "x.png"
    image, note = checks.normalize_image(_save(tmp_path, Image.new(mode, (8, 8)), name))
    assert image.mode == "RGB" and note == f"{mode}->RGB"


def test_opaque_rgba_loses_its_alpha(tmp_path):
    image, note = checks.normalize_image(
        _save(tmp_path, Image.new("RGBA", (8, 8), (10, 20, 30, 255)))
    )
    assert image.mode == "RGB" and image.getpixel((0, 0)) == (10, 20, 30)
    assert "RGBA->RGB" in note


def test_transparent_pixels_are_rejected(tmp_path):
    rgba = Image.new("RGBA", (8, 8), (255, 255, 255, 255))
    rgba.putpixel((3, 3), (255, 255, 255, 0))
    with pytest.raises(checks.ImageRejected, match="transparent"):
        checks.normalize_image(_save(tmp_path, rgba))


def test_truncated_corrupt_and_missing_files_are_rejected(tmp_path):
    good = _save(tmp_path, Image.new("RGB", (64, 64), "blue"))
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(good.read_bytes()[:60])
    corrupt = tmp_path / "junk.png"
    corrupt.write_bytes(b"not an image at all")
    for path, reason in (
        (truncated, "decoded"),
        (corrupt, "decoded"),
        (tmp_path / "no.png", "missing"),
    ):
        with pytest.raises(checks.ImageRejected, match=reason):
            checks.normalize_image(path)


def test_16_bit_images_are_rejected(tmp_path):
    with pytest.raises(checks.ImageRejected, match="8-bit"):
        checks.normalize_image(_save(tmp_path, Image.new("I;16", (8, 8))))


# ----------------------------------------------------------------------------- counts


def test_pair_nouns_count_twice(color):
    assert checks.expected_counts(color, ["sneakers", "lamp"]) == {"sneakers": 2, "lamp": 1}


def test_iou_by_hand():
    assert checks.iou([0, 0, 10, 10], [0, 0, 10, 10]) == 1.0
    assert checks.iou([0, 0, 10, 10], [5, 0, 15, 10]) == pytest.approx(50 / 150)
    assert checks.iou([0, 0, 10, 10], [20, 20, 30, 30]) == 0.0
    assert checks.iou([0, 0, 0, 0], [0, 0, 0, 0]) == 0.0


def test_duplicate_boxes_of_one_object_merge_but_neighbours_do_not():
    boxes = [[0, 0, 10, 10], [0.5, 0, 10, 10], [20, 0, 30, 10], [0, 0, 10, 20]]
    scores = [0.5, 0.9, 0.6, 0.7]
    # box 1 (best) absorbs box 0 (IoU 0.95); box 3 overlaps box 1 by IoU 0.475 (< 0.7): kept
    assert checks.merge_boxes(boxes, scores, 0.7) == [1, 2, 3]
    assert checks.merge_boxes(boxes, scores, 0.4) == [1, 2]
    assert checks.merge_boxes([], [], 0.7) == []


def test_count_verdict_exact_match_passes():
    verdict = checks.count_verdict({"sneakers": 2, "lamp": 1}, {"sneakers": 2, "lamp": 1})
    assert verdict.outcome == "pass" and verdict.detail["found"] == {"sneakers": 2, "lamp": 1}


@pytest.mark.parametrize(
    "found, reason",
    [
        ({"sneakers": 1, "lamp": 1}, "sneakers: expected 2, found 1"),  # one of the pair
        ({"sneakers": 2}, "lamp: expected 1, found 0"),  # missing object
        ({"sneakers": 2, "lamp": 2}, "lamp: expected 1, found 2"),  # an extra instance
    ],
)
def test_count_verdict_names_every_wrong_class(found, reason):
    verdict = checks.count_verdict({"sneakers": 2, "lamp": 1}, found)
    assert verdict.outcome == "fail" and verdict.reason == reason


# ----------------------------------------------------------------------------- background


def _canvas(color=(255, 255, 255), size=(100, 100)):
    return Image.new("RGB", size, color)


def test_white_canvas_with_drawn_objects_passes():
    image = _canvas()
    draw = ImageDraw.Draw(image)
    draw.rectangle([10, 10, 40, 40], fill=(200, 0, 0))
    draw.ellipse([60, 50, 90, 90], fill=(0, 0, 200))
    mask = checks.box_mask(image.size, [[10, 10, 41, 41], [60, 50, 91, 91]])
    verdict = checks.background_verdict(image, mask)
    assert verdict.outcome == "pass" and verdict.detail["white_fraction"] == 1.0


def test_cluttered_scene_fails():
    rng = np.random.default_rng(0)
    clutter = Image.fromarray(rng.integers(0, 256, (100, 100, 3), dtype=np.uint8))
    verdict = checks.background_verdict(clutter, np.zeros((100, 100), bool))
    assert verdict.outcome == "fail" and "needed" in verdict.reason


def test_brightness_threshold_is_inclusive():
    mask = np.zeros((10, 10), bool)
    at = checks.background_verdict(_canvas((190, 190, 190), (10, 10)), mask, 190, 1.0)
    below = checks.background_verdict(_canvas((189, 189, 189), (10, 10)), mask, 190, 1.0)
    assert at.outcome == "pass" and below.outcome == "fail"


def test_fraction_threshold_boundary():
    # 100 pixels: 70 white, 30 black -> exactly 70 % passes at 0.7, fails at 0.71
    image = _canvas(size=(10, 10))
    ImageDraw.Draw(image).rectangle([0, 0, 9, 2], fill=(0, 0, 0))
    mask = np.zeros((10, 10), bool)
    assert checks.white_fraction(image, mask, 190) == 0.7
    assert checks.background_verdict(image, mask, 190, 0.7).outcome == "pass"
    assert checks.background_verdict(image, mask, 190, 0.71).outcome == "fail"


def test_object_pixels_are_left_out_of_the_background():
    image = _canvas(size=(10, 10))
    ImageDraw.Draw(image).rectangle([0, 0, 9, 4], fill=(0, 0, 0))  # dark object, top half
    mask = np.zeros((10, 10), bool)
    mask[:5] = True
    assert checks.white_fraction(image, mask, 190) == 1.0
    assert checks.white_fraction(image, np.zeros((10, 10), bool), 190) == 0.5


def test_grayscale_is_pil_luma():
    # pure green: L = 0.587 * 255 = 149.7 -> not white at 190; pure yellow: 225.9 -> white
    mask = np.zeros((4, 4), bool)
    assert checks.white_fraction(_canvas((0, 255, 0), (4, 4)), mask, 190) == 0.0
    assert checks.white_fraction(_canvas((255, 255, 0), (4, 4)), mask, 190) == 1.0


def test_objects_covering_everything_fail():
    verdict = checks.background_verdict(_canvas(size=(4, 4)), np.ones((4, 4), bool))
    assert verdict.outcome == "fail" and "whole image" in verdict.reason


def test_box_mask_clips_to_the_image():
    mask = checks.box_mask((10, 5), [[-3, -3, 2, 2], [8, 3, 40, 40]])
    assert mask.shape == (5, 10) and mask.sum() == 4 + 2 * 2


# ----------------------------------------------------------------------------- questions


def test_color_questions_use_the_vocabulary_as_options(color):
    asked = checks.questions(color, ["monitor", "sneakers"], ["red", "blue"])
    assert [q.text for q in asked] == [
        "What color is the monitor? Answer with one word.",
        "What color are the sneakers? Answer with one word.",
    ]
    assert asked[0].options == color.labels.names and asked[0].correct == {"red"}


def test_relation_questions_offer_one_option_per_meaning(relative_size):
    asked = checks.questions(
        relative_size, ["cup", "lamp", "chair"], ["bigger than", "smaller than"]
    )
    assert asked[0].options == ("larger than", "smaller than")  # "bigger than" is a synonym
    assert asked[0].correct == {"larger than"} and asked[1].correct == {"smaller than"}
    assert "the cup is ___ the lamp" in asked[0].text
    assert "the lamp is ___ the chair" in asked[1].text


def test_answers_are_the_best_option_and_ties_fail(color):
    asked = checks.questions(color, ["monitor"], ["red"])
    red = color.labels.names.index("red")
    scores = [-5.0] * len(color.labels)
    scores[red] = -1.0
    assert checks.answer_verdict(asked, [scores]).outcome == "pass"
    wrong = list(scores)
    wrong[(red + 1) % len(wrong)] = -0.5
    verdict = checks.answer_verdict(asked, [wrong])
    assert verdict.outcome == "fail" and "expected red" in verdict.reason
    tie = list(scores)
    tie[(red + 1) % len(tie)] = -1.0
    verdict = checks.answer_verdict(asked, [tie])
    assert verdict.outcome == "fail" and "a tie of" in verdict.reason


def test_family_question_must_have_its_slots(family_dir):
    from autocomp.errors import UsageError
    from tests.conftest import small_attribute_family

    text = small_attribute_family("asks") + 'validation: {question: "What color?"}\n'
    path = family_dir("asks", text)
    from autocomp.protocol.family import load_family_file

    with pytest.raises(UsageError, match=r"validation.question.*\{object\}"):
        load_family_file(path)
