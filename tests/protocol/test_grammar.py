import pytest

from autocomp.protocol.grammar import capitalize_first, indefinite_article, join_list, with_article


@pytest.mark.parametrize(
    ("phrase", "article"),
    [
        ("red cup", "a"),
        ("orange cup", "an"),
        ("olive lamp", "an"),
        ("umbrella", "an"),
        ("unicycle", "a"),
        ("used car", "a"),
        ("egg tart", "an"),
        ("euro coin", "a"),
        ("one-way sign", "a"),
        ("hour glass", "an"),
        ("hot air balloon", "a"),
        ("SUV", "an"),
        ("CD", "a"),
        ("Formula 1 car", "a"),
        ("8-ball", "an"),
        ("ice cream", "an"),
        ("extractor fan", "an"),
        ("yellow kite", "a"),
    ],
)
def test_indefinite_article_follows_the_sound(phrase, article):
    assert indefinite_article(phrase) == article


def test_article_needs_a_word():
    with pytest.raises(ValueError):
        indefinite_article("  ")


def test_list_join_uses_the_serial_comma():
    assert join_list(["a"]) == "a"
    assert join_list(["a", "b"]) == "a and b"
    assert join_list(["a", "b", "c"]) == "a, b, and c"
    with pytest.raises(ValueError):
        join_list([])


def test_capitalize_first_never_lowers_the_rest():
    assert capitalize_first("an SUV") == "An SUV"
    assert with_article("orange cup") == "an orange cup"
