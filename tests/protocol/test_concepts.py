import itertools
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autocomp.errors import UsageError
from autocomp.protocol.concepts import (
    Concept,
    concept_id,
    count_concepts,
    derive_seed,
    enumerate_concepts,
    label_prior,
    sample_concepts,
    scene_key,
)
from autocomp.protocol.family import load_all, load_family
from tests.conftest import small_attribute_family, small_relation_family


def _valid(family, c: Concept) -> bool:
    objs, labs = c.objects, c.labels
    k = c.n - 1 if family.is_relation else c.n
    if len(objs) != c.n or len(labs) != k or len(set(objs)) != c.n:
        return False
    if not all(family.objects.compatible(a, b) for a, b in itertools.combinations(objs, 2)):
        return False
    if family.is_relation:
        return len({family.meaning(r) for r in labs}) == len(labs)
    return (
        len(set(labs)) == len(labs)
        and all(family.labels.compatible(a, b) for a, b in itertools.combinations(labs, 2))
        and all(family.label_allowed(lab, objs) for lab in labs)
    )


@pytest.mark.parametrize("kind", ["attribute", "relation"])
def test_count_matches_enumeration_on_small_families(family_dir, kind):
    name = "tiny_attr" if kind == "attribute" else "tiny_rel"
    family_dir(name, small_attribute_family() if kind == "attribute" else small_relation_family())
    family = load_family(name)
    for n in range(family.n_min, family.n_max + 1):
        listed = list(enumerate_concepts(family, n))
        keys = {scene_key(family, c.objects, c.labels) for c in listed}
        assert len(keys) == len(listed) == count_concepts(family, n)
        assert all(_valid(family, c) for c in listed)
        # brute force over every description confirms nothing valid was missed
        k = n - 1 if family.is_relation else n
        brute = set()
        for objs in itertools.permutations(family.objects.names, n):
            for labs in itertools.permutations(family.labels.names, k):
                c = Concept(family.name, n, objs, labs)
                if _valid(family, c):
                    brute.add(scene_key(family, objs, labs))
        assert brute == keys


def test_shipped_counts(shape_color, color, position, relative_size):
    # 5 shapes, 19 colors without gold+yellow or navy+blue together
    assert count_concepts(shape_color, 1) == 95
    assert count_concepts(shape_color, 2) == 10 * (171 - 2) * 2
    assert count_concepts(shape_color, 3) == 10 * (969 - 2 * 17) * 6
    assert count_concepts(color, 1) == 216 * 19
    # position N=2: ordered object pairs x 4 relations / 2 descriptions per scene
    pairs = count_concepts(position, 2) * 2 // 4
    assert count_concepts(relative_size, 2) == pairs  # 2 meanings: larger, smaller


@pytest.mark.parametrize("family_name", ["color", "shape_color", "position", "relative_size"])
def test_sampled_concepts_are_valid_unique_and_balanced(family_name):
    family = load_family(family_name)
    for n in range(family.n_min, family.n_max + 1):
        count = min(600, count_concepts(family, n))
        sampled = sample_concepts(family, n, count, seed=7)
        assert len(sampled) == count
        assert all(_valid(family, c) for c in sampled)
        keys = [scene_key(family, c.objects, c.labels) for c in sampled]
        assert len(set(keys)) == count
        ids = [concept_id(family, c) for c in sampled]
        assert len(set(ids)) == count
        prior = label_prior(sampled)
        objects = prior["objects"].values()
        # balanced pool: no object is drawn twice more than another, across the whole sample
        assert max(objects) - min(objects) <= 2 or len(family.objects) < 10
        if not family.is_relation:
            labels = prior["labels"].values()
            assert max(labels) - min(labels) <= 2 + count * n // 100


def test_relative_size_n3_always_mixes_larger_and_smaller(relative_size):
    sampled = sample_concepts(relative_size, 3, 300, seed=1)
    for c in sampled:
        assert {relative_size.meaning(r) for r in c.labels} == {"larger", "smaller"}


def test_same_seed_same_concepts_other_seed_other_concepts(position):
    a = sample_concepts(position, 3, 200, seed=3)
    assert a == sample_concepts(position, 3, 200, seed=3)
    assert a != sample_concepts(position, 3, 200, seed=4)


def test_sampling_does_not_depend_on_the_hash_seed():
    code = (
        "from autocomp.protocol.concepts import sample_concepts; from autocomp.protocol.family import load_family;"
        "f = load_family('color'); print([c.objects + c.labels for c in sample_concepts(f, 3, 50, 11)])"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        ).stdout
        for seed in ("0", "1", "12345")
    }  # fmt: skip
    assert len(outputs) == 1


def test_derived_seed_is_stable():
    assert derive_seed(0, "color", 2) == derive_seed(0, "color", 2)
    assert derive_seed(0, "color", 2) != derive_seed(0, "color", 3)
    assert 0 <= derive_seed(0, "color", 2) < 2**64


def test_whole_small_space_can_be_sampled(shape_color):
    everything = sample_concepts(shape_color, 2, count_concepts(shape_color, 2), seed=0)
    keys = {scene_key(shape_color, c.objects, c.labels) for c in everything}
    assert len(keys) == 3380


def test_count_larger_than_space_is_a_usage_error(shape_color):
    with pytest.raises(UsageError) as err:
        sample_concepts(shape_color, 1, 96, seed=0)
    assert "only 95 distinct concepts" in str(err.value) and err.value.what == "count"


@pytest.mark.parametrize(("name", "n"), [("color", 0), ("color", 4), ("position", 1)])
def test_n_outside_range_is_a_usage_error(name, n):
    with pytest.raises(UsageError, match="supports N from"):
        sample_concepts(load_family(name), n, 1, seed=0)


def test_relation_scene_key_normalizes_inverse_and_synonyms(relative_size, position):
    assert scene_key(position, ["chair", "table"], ["above"]) == scene_key(
        position, ["table", "chair"], ["under"]
    )
    assert scene_key(relative_size, ["cup", "lamp"], ["bigger than"]) == scene_key(
        relative_size, ["lamp", "cup"], ["smaller than"]
    )
    assert scene_key(position, ["chair", "table"], ["above"]) != scene_key(
        position, ["table", "chair"], ["above"]
    )


def test_attribute_scene_key_is_order_free(shape_color):
    assert scene_key(shape_color, ["sphere", "cube"], ["blue", "red"]) == scene_key(
        shape_color, ["cube", "sphere"], ["red", "blue"]
    )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 3), count=st.integers(1, 60))
def test_property_samples_valid_unique_deterministic(seed, n, count):
    for family in load_all():
        if not family.n_min <= n <= family.n_max:
            continue
        a = sample_concepts(family, n, count, seed)
        assert a == sample_concepts(family, n, count, seed)
        assert len({scene_key(family, c.objects, c.labels) for c in a}) == count
        assert all(_valid(family, c) for c in a)
