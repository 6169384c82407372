import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocomp.protocol.binding import bind
from autocomp.protocol.concepts import sample_concepts, scene_key
from autocomp.protocol.family import load_all
from autocomp.protocol.minimal import minimal_caption
from autocomp.protocol.negatives import arrangements, build_candidates, chance, expected_counts

FAMILIES = {f.name: f for f in load_all()}


def test_formulas_match_the_paper():
    assert expected_counts(False, 2) == (1, 15)
    assert expected_counts(False, 3) == (5, 728)
    assert expected_counts(True, 2) == (1, 3)
    assert expected_counts(True, 3) == (5, 107)


@pytest.mark.parametrize(
    ("relation", "n", "swap", "conf"),
    [(False, 2, "50.0", "6.3"), (False, 3, "16.7", "0.14"), (True, 2, "50.0", "25.0"), (True, 3, "16.7", "0.93")],
)  # fmt: skip
def test_chance_reproduces_the_papers_baselines(relation, n, swap, conf):
    from autocomp.cli.demo import _pct

    s, c = expected_counts(relation, n)
    assert _pct(chance(s)) == swap
    assert _pct(chance(c)) == conf


def test_arrangement_order_is_canonical():
    arr = arrangements(False, 2)
    assert len(arr) == 16
    assert arr.objects[arr.identity] == (0, 1) and arr.labels[arr.identity] == (0, 1)
    assert [(arr.objects[i], arr.labels[i]) for i in arr.swap] == [((0, 1), (1, 0))]
    rel = arrangements(True, 3)
    assert len(rel) == 27 * 4
    assert [rel.objects[i] for i in rel.swap] == [
        (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)
    ]  # fmt: skip


def test_hand_checked_color_n2(color):
    sets = build_candidates(
        color, ["cup", "lamp"], ["red", "orange"], "A red cup and an orange lamp."
    )
    assert sets.swap == ["An orange cup and a red lamp."]
    assert "A red cup and a red cup." in sets.confusion
    assert "An orange lamp and an orange lamp." in sets.confusion
    # the same scene, in the other order: kept and flagged under the paper protocol
    assert "An orange lamp and a red cup." in sets.confusion
    flagged = [c for c, f in zip(sets.confusion, sets.confusion_same_scene) if f]
    assert flagged == ["An orange lamp and a red cup."]
    strict = build_candidates(
        color, ["cup", "lamp"], ["red", "orange"], "A red cup and an orange lamp.", "strict"
    )
    assert len(strict.confusion) == 14 and "An orange lamp and a red cup." not in strict.confusion


def test_hand_checked_position_n2(position):
    sets = build_candidates(
        position, ["chair", "umbrella"], ["above"], "A chair is above an umbrella."
    )
    assert sorted(sets.confusion) == [
        "A chair is above a chair.",
        "An umbrella is above a chair.",
        "An umbrella is above an umbrella.",
    ]
    assert sets.swap == ["An umbrella is above a chair."]


def test_relative_size_n3_swap_holds_the_same_scene(relative_size):
    objs, rels = ["chair", "cup", "lamp"], ["larger than", "smaller than"]
    text = minimal_caption(relative_size, objs, rels)
    sets = build_candidates(relative_size, objs, rels, text)
    assert sum(sets.swap_same_scene) == 1
    flagged = sets.swap[sets.swap_same_scene.index(True)]
    assert flagged.startswith("A lamp is larger than a cup, which is smaller than a chair")
    strict = build_candidates(relative_size, objs, rels, text, "strict")
    assert len(strict.swap) == 4 and len(strict.confusion) == 106


def test_article_and_pair_correction_after_substitution(color):
    sets = build_candidates(
        color, ["cup", "gloves"], ["red", "orange"], "A red cup and a pair of orange gloves."
    )
    assert sets.swap == ["An orange cup and a pair of red gloves."]
    assert "A pair of red gloves and a pair of red gloves." in sets.confusion
    assert "An orange cup and an orange cup." in sets.confusion


def test_contextual_caption_substitution(color):
    text = "On a sunny porch a yellow umbrella leans against a black bicycle near a pair of orange sneakers."
    objs, labs = ["umbrella", "bicycle", "sneakers"], ["yellow", "black", "orange"]
    sets = build_candidates(color, objs, labs, text)
    assert len(sets.swap) == 5 and len(sets.confusion) == 728
    assert (
        "On a sunny porch an orange umbrella leans against a black bicycle near a pair of yellow sneakers."
        in sets.swap
    )
    assert (
        "On a sunny porch a pair of yellow sneakers leans against a black bicycle near an orange umbrella."
        in sets.confusion
    )


def release_style_confusion(caption, objects, labels):
    """The public release's evaluation-time generator: sequential str.replace per slot."""
    n = len(objects)
    out = []
    for p in itertools.product(range(n), repeat=n):
        for q in itertools.product(range(n), repeat=n):
            c = caption
            for i in range(n):
                c = c.replace(objects[i], objects[p[i]])
            for i in range(n):
                c = c.replace(labels[i], labels[q[i]])
            out.append(c)
    return out


def test_the_release_defect_is_reproduced_and_fixed(color):
    objs, labs = ["chair", "cup", "lamp"], ["red", "blue", "green"]
    text = minimal_caption(color, objs, labs)
    naive = release_style_confusion(text, objs, labs)
    true_swaps = build_candidates(color, objs, labs, text).swap
    assert len(naive) == 729 and len(set(naive)) == 196  # the collapse the issue reports
    assert not set(true_swaps) & set(naive)  # the true swap never appears
    exact = build_candidates(color, objs, labs, text)
    assert len(set(exact.confusion)) == 728 and set(true_swaps) <= set(exact.confusion)


def check_invariants(family, objects, labels, text, protocol):
    sets = build_candidates(family, objects, labels, text, protocol)
    n = len(objects)
    swap, conf = expected_counts(family.is_relation, n)
    if protocol == "paper":
        assert (len(sets.swap), len(sets.confusion)) == (swap, conf)
    else:
        assert not any(sets.swap_same_scene) and not any(sets.confusion_same_scene)
        assert len(sets.confusion) == conf - sum(
            build_candidates(family, objects, labels, text).confusion_same_scene
        )
    assert len(set(sets.confusion)) == len(sets.confusion)
    assert len(set(sets.swap)) == len(sets.swap)
    assert sets.caption not in sets.confusion and sets.caption not in sets.swap
    assert [sets.confusion[i] for i in sets.swap_in_confusion] == sets.swap
    # the flags say exactly which candidates describe the positive's scene
    arr = arrangements(family.is_relation, n)
    positive_key = scene_key(family, objects, labels)
    for text_c, index, flag in zip(
        sets.confusion, sets.confusion_arrangements, sets.confusion_same_scene
    ):
        objs_c = [objects[i] for i in arr.objects[index]]
        labs_c = [labels[i] for i in arr.labels[index]]
        same = len(set(objs_c)) == n and scene_key(family, objs_c, labs_c) == positive_key
        assert flag == same
        if text == minimal_caption(family, objects, labels):
            # substitution on the caption equals rendering the arranged concept from scratch
            assert text_c == minimal_caption(family, objs_c, labs_c)
    return sets


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("protocol", ["paper", "strict"])
def test_invariants_on_sampled_minimal_captions(name, protocol):
    family = FAMILIES[name]
    for n in range(max(2, family.n_min), family.n_max + 1):
        for c in sample_concepts(family, n, 25, seed=2):
            check_invariants(
                family, c.objects, c.labels, minimal_caption(family, c.objects, c.labels), protocol
            )


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(sorted(FAMILIES)),
    n=st.integers(2, 3),
    seed=st.integers(0, 10_000),
    protocol=st.sampled_from(["paper", "strict"]),
    scene=st.sampled_from(["In the {s} a ", "{s}: ", "Look, "]),
)
def test_property_contextual_captions(name, n, seed, protocol, scene):
    family = FAMILIES[name]
    concept = sample_concepts(family, n, 1, seed)[0]
    body = minimal_caption(family, concept.objects, concept.labels)
    body = body[0].lower() + body[1:].replace(" on a white background.", " in the evening.")
    text = scene.format(s="garden") + body
    sets = check_invariants(family, concept.objects, concept.labels, text, protocol)
    assert sets.caption.startswith(scene.format(s="garden")[:4])


def test_n1_sanity_sets(color):
    sets = build_candidates(color, ["cup"], ["orange"], "An orange cup on a white background.")
    assert sets.swap == [] and sets.confusion == []
    assert (
        len(sets.vary_attribute) == 18 and "A red cup on a white background." in sets.vary_attribute
    )
    assert len(sets.vary_object) == 215
    assert "A pair of orange gloves on a white background." in sets.vary_object
    assert "An orange SUV on a white background." in sets.vary_object
    assert chance(len(sets.vary_attribute)) == pytest.approx(1 / 19)


def test_candidate_order_is_shared_by_minimal_and_contextual(shape_color):
    objs, labs = ["cube", "sphere"], ["red", "blue"]
    a = build_candidates(shape_color, objs, labs, minimal_caption(shape_color, objs, labs))
    b = build_candidates(
        shape_color, objs, labs, "On a desk, a blue sphere sits beside a red cube."
    )
    assert a.confusion_arrangements == b.confusion_arrangements
    assert a.swap_arrangements == b.swap_arrangements


def test_material_family_defined_in_one_yaml_file(fixture_path):
    from autocomp.protocol.family import load_family

    material = load_family("material")
    objs, labs = ["chair", "cup", "lamp"], ["wooden", "metal", "plastic"]
    sets = build_candidates(material, objs, labs, minimal_caption(material, objs, labs))
    assert len(sets.confusion) == 728 and sets.swap[0].startswith("A wooden chair, a plastic cup")


def test_bind_reuse_gives_the_same_sets(color):
    objs, labs = ["cup", "lamp"], ["red", "green"]
    text = minimal_caption(color, objs, labs)
    template = bind(color, objs, labs, text)
    assert build_candidates(color, objs, labs, text, template=template) == build_candidates(
        color, objs, labs, text
    )
