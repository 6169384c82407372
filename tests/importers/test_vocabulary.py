"""Release names onto our vocabularies: each rule, in order, and what stays unmapped."""

from __future__ import annotations

import pytest

from autocomp.importers.vocabulary import Mapper


@pytest.mark.parametrize(
    "name, entry, rule",
    [
        ("chair", "chair", "exact"),
        ("SUV", "SUV", "exact"),
        ("Potted Plant", "potted plant", "case"),
        ("potted   PLANT", "potted plant", "case"),
        ("Suv", "SUV", "case"),
        ("Cookies", "cookie", "renamed"),
        ("Frame", "picture frame", "renamed"),
        ("PC Mouse", "computer mouse", "renamed"),
        ("Earphone", "earphones", "renamed"),
        ("Chairs", "chair", "plural"),
        ("Benches", "bench", "plural"),
        ("Lamps", "lamp", "plural"),
    ],
)
def test_object_names_map_by_the_first_rule_that_finds_them(color, name, entry, rule):
    assert Mapper(color.objects).lookup(name) == (entry, rule)


@pytest.mark.parametrize("name", ["Chips", "Toy", "Picture", "Crane", "DVD", "spaceship", ""])
def test_names_our_curation_dropped_stay_unmapped(color, name):
    mapper = Mapper(color.objects)
    assert mapper.map(name) is None
    assert mapper.report()["unmapped"] == {name: 1}


def test_colour_and_relation_synonyms(color, position):
    colours = Mapper(color.labels)
    assert colours.lookup("grey") == ("gray", "synonym")
    assert colours.lookup("Grey") == ("gray", "synonym")
    assert colours.lookup("white") is None  # dropped from our colours
    relations = Mapper(position.labels)
    assert relations.lookup("to the left of") == ("to the left of", "exact")
    assert relations.lookup("below") == ("under", "synonym")
    assert relations.lookup("Left of") == ("to the left of", "synonym")
    assert relations.lookup("near") is None


def test_the_report_counts_rules_and_unmapped_names(color):
    mapper = Mapper(color.objects)
    for name in ["Chair", "Chair", "chair", "Cookies", "Chips", "Chips", "Toy"]:
        mapper.map(name)
    report = mapper.report()
    assert report["by_rule"] == {"case": 1, "exact": 1, "renamed": 1}
    assert report["normalised"] == {"Cookies": {"to": "cookie", "rule": "renamed"}}
    assert report["unmapped"] == {"Chips": 2, "Toy": 1}
