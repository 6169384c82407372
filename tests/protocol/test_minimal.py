import pytest

from autocomp.protocol.binding import bind
from autocomp.protocol.concepts import sample_concepts
from autocomp.protocol.family import load_all
from autocomp.protocol.minimal import minimal_caption, spec_text

HAND_CHECKED = [
    ("color", ["cup"], ["orange"], "An orange cup on a white background."),
    ("color", ["gloves"], ["green"], "A pair of green gloves on a white background."),
    ("color", ["chair", "cup"], ["red", "blue"], "A red chair and a blue cup on a white background."),
    (
        "color",
        ["chair", "cup", "gloves"],
        ["red", "blue", "green"],
        "A red chair, a blue cup, and a pair of green gloves on a white background.",
    ),
    ("color", ["SUV", "umbrella"], ["olive", "red"], "An olive SUV and a red umbrella on a white background."),
    ("shape_color", ["cube"], ["orange"], "An orange cube on a white background."),
    (
        "shape_color",
        ["sphere", "cube", "cone"],
        ["blue", "red", "orange"],
        "A blue sphere, a red cube, and an orange cone on a white background.",
    ),
    ("position", ["chair", "umbrella"], ["above"], "A chair is above an umbrella on a white background."),
    (
        "position",
        ["chair", "lamp", "gloves"],
        ["above", "to the left of"],
        "A chair is above a lamp, which is to the left of a pair of gloves on a white background.",
    ),
    ("position", ["SUV", "CD"], ["under"], "An SUV is under a CD on a white background."),
    (
        "relative_size",
        ["egg tart", "cup", "lamp"],
        ["larger than", "smaller than"],
        "An egg tart is larger than a cup, which is smaller than a lamp on a white background.",
    ),
    ("relative_size", ["scissors", "oven"], ["bigger than"], "A pair of scissors is bigger than an oven on a white background."),
]  # fmt: skip


@pytest.mark.parametrize(("family_name", "objects", "labels", "expected"), HAND_CHECKED)
def test_hand_checked_minimal_captions(family_name, objects, labels, expected):
    family = next(f for f in load_all() if f.name == family_name)
    assert minimal_caption(family, objects, labels) == expected


def test_spec_text_has_no_suffix(color):
    assert spec_text(color, ["cup", "lamp"], ["red", "green"]) == "a red cup and a green lamp"


@pytest.mark.parametrize("family", load_all(), ids=lambda f: f.name)
def test_grammar_of_every_family_at_every_n(family):
    """Every sampled Minimal caption is well-formed and passes the binding check."""
    for n in range(family.n_min, family.n_max + 1):
        for c in sample_concepts(family, n, 80, seed=5):
            text = minimal_caption(family, c.objects, c.labels)
            assert text[0].isupper() and text.endswith(" on a white background.")
            assert " a a" not in text and " an a " not in text and "  " not in text
            for word in ("a", "an"):
                for phrase in text.replace(",", "").split(f" {word} ")[1:]:
                    from autocomp.protocol.grammar import indefinite_article

                    assert indefinite_article(phrase) == word, text
            if not family.is_relation and n >= 3:
                assert text.count(",") == n - 1  # serial comma
            if family.is_relation and n == 3:
                assert ", which is " in text
            template = bind(family, c.objects, c.labels, text)
            assert template.fill(family, c.objects, c.labels) == text
