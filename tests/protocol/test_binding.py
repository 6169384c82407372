import pytest

from autocomp.protocol.binding import BindingError, bind


def reason(family, objects, labels, text):
    with pytest.raises(BindingError) as err:
        bind(family, objects, labels, text)
    return err.value.reason


def test_attribute_binding_allows_one_word_between(color):
    objs, labs = ["cup", "lamp"], ["red", "green"]
    bind(color, objs, labs, "A red ceramic cup stands by a green lamp.")
    assert (
        reason(color, objs, labs, "A red old ceramic cup stands by a green lamp.")
        == "missing_binding"
    )


def test_attribute_binding_rejects_wrong_association(color):
    assert (
        reason(color, ["cup", "lamp"], ["red", "green"], "A green cup by a red lamp.")
        == "missing_binding"
    )


def test_unbound_concept_words_are_rejected(color):
    text = "A red cup and a green lamp stand by a red wall."
    assert reason(color, ["cup", "lamp"], ["red", "green"], text) == "unbound_mention"
    text = "A red cup and a green lamp; the cup is empty."
    assert reason(color, ["cup", "lamp"], ["red", "green"], text) == "unbound_mention"


def test_matching_is_case_insensitive_and_whole_word(color):
    bind(color, ["cup", "lamp"], ["red", "green"], "Red cup, green LAMP, and a cupboard.")
    # a hyphenated compound is not a mention of the color
    bind(color, ["cup", "lamp"], ["red", "green"], "A red cup, a green lamp and a red-brick wall.")


def test_pair_noun_spans_include_the_determiner(color):
    t = bind(
        color, ["gloves", "cup"], ["green", "red"], "A pair of green gloves lies near a red cup."
    )
    gloves = next(h for h in t.holes if h.slot == 0)
    assert (gloves.article, gloves.pair, gloves.start) == ("A", "pair of ", 0)
    assert t.fill(color, ["cup", "gloves"], ["orange", "red"]) == (
        "An orange cup lies near a pair of red gloves."
    )


def test_relation_binding_in_order(position):
    objs, rels = ["chair", "lamp"], ["above"]
    bind(position, objs, rels, "An old chair hangs above a lamp in the attic.")
    assert reason(position, objs, rels, "A lamp is above a chair.") == "missing_binding"
    assert reason(position, objs, rels, "A chair is beside a lamp.") == "relation_count"
    assert reason(position, objs, rels, "Above a chair, above a lamp.") == "relation_count"


def test_relation_chain_with_repeated_middle_object(position):
    objs, rels = ["chair", "lamp", "cup"], ["above", "to the left of"]
    text = "A chair sits above a lamp, and the lamp is to the left of a cup."
    t = bind(position, objs, rels, text)
    assert sum(1 for h in t.holes if h.kind == "object" and h.slot == 1) == 2
    assert t.fill(position, ["cup", "lamp", "chair"], rels) == (
        "A cup sits above a lamp, and the lamp is to the left of a chair."
    )
    # both mentions of the middle object change together
    assert t.fill(position, ["chair", "umbrella", "cup"], rels) == (
        "A chair sits above an umbrella, and the umbrella is to the left of a cup."
    )


def test_unbound_object_in_relation_caption(position):
    text = "A chair is above a lamp next to another chair."
    assert reason(position, ["chair", "lamp"], ["above"], text) == "unbound_mention"


def test_template_fill_with_identity_normalizes_articles(color):
    t = bind(color, ["cup", "lamp"], ["orange", "red"], "There is a orange cup and a red lamp.")
    assert (
        t.fill(color, ["cup", "lamp"], ["orange", "red"])
        == "There is an orange cup and a red lamp."
    )


def test_the_article_and_capitals_are_kept(color):
    t = bind(color, ["cup", "lamp"], ["red", "green"], "Red cup beside the green lamp.")
    assert t.fill(color, ["lamp", "gloves"], ["orange", "green"]) == (
        "Orange lamp beside the pair of green gloves."
    )


def test_the_determiner_is_found_as_by_a_search_from_the_cursor():
    """`_determiner` starts its search late (at the tail before the hole); it must find the same
    leftmost match as a search from the cursor, on texts full of near-misses."""
    import random

    from autocomp.protocol.binding import _DETERMINER, _determiner

    pieces = ["a", "an", "the", "A", "The", "pair", "of", "red", "x", "-", "'", "’", ",", "(", "é"]
    spaces = [" ", "  ", "\n", "\t ", ""]
    rng = random.Random(0)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) + rng.choice(spaces) for _ in range(rng.randint(0, 8)))
        text += "cup"
        start = len(text) - 3
        cursor = rng.randint(0, start)
        expected = _DETERMINER.search(text, cursor, start)
        found = _determiner(text, text[::-1], cursor, start)
        assert (found.span(), found.groups()) == (expected.span(), expected.groups()), text
