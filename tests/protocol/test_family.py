import pytest

from autocomp.errors import UsageError
from autocomp.protocol.family import available_families, load_all, load_family
from tests.conftest import small_attribute_family


def test_shipped_families_and_sizes():
    families = {f.name: f for f in load_all()}
    assert set(families) == {"color", "shape_color", "position", "relative_size"}
    assert len(families["color"].labels) == 19  # the paper's 20 colors without white
    assert "white" not in families["color"].labels.names
    assert len(families["color"].objects) == 216
    assert families["shape_color"].objects.names == (
        "cube",
        "sphere",
        "pyramid",
        "cone",
        "cylinder",
    )
    assert families["position"].labels.names == (
        "above",
        "under",
        "to the left of",
        "to the right of",
    )
    assert (families["color"].n_min, families["color"].n_max) == (1, 3)
    assert (families["position"].n_min, families["position"].n_max) == (2, 3)


def test_pair_nouns_and_acronyms(color):
    gloves = color.objects.by_name["gloves"]
    assert gloves.pair and gloves.instances == 2
    assert not color.objects.by_name["cup"].pair
    assert "SUV" in color.objects.names
    pairs = {e.name for e in color.objects.entries if e.pair}
    assert pairs == {
        "sneakers", "glasses", "gloves", "leather shoes", "boots", "slippers", "sandals",
        "high heels", "scissors", "chopsticks", "headphones", "pliers", "binoculars", "earphones",
    }  # fmt: skip


def test_never_together_and_containment_conflicts(color):
    assert not color.labels.compatible("gold", "yellow")
    assert not color.labels.compatible("navy", "blue")
    assert color.labels.compatible("red", "blue")
    # derived automatically: one name holds the other as whole words
    assert not color.objects.compatible("pot", "tea pot")
    assert not color.objects.compatible("fan", "extractor fan")
    assert not color.objects.compatible("car", "sports car")  # curated group
    assert color.objects.compatible("cup", "chair")


def test_relations_know_meaning_and_inverse(relative_size, position):
    assert relative_size.meaning("bigger than") == relative_size.meaning("larger than") == "larger"
    assert relative_size.inverse_meaning("larger") == "smaller"
    assert position.inverse_meaning("left") == "right"


def test_unknown_family_suggests_known_ones():
    with pytest.raises(UsageError) as err:
        load_family("colour")
    message = str(err.value)
    assert "colour" in message and "did you mean 'color'" in message
    assert "position" in message


def test_new_family_from_one_yaml_file(fixture_path):
    material = load_family("material")
    assert material.kind == "attribute"
    assert material.labels.names == ("wooden", "metal", "glass", "plastic", "leather")
    assert "material" in available_families()
    # "glass" is inside "wine glass": that object and label never share a concept
    assert ("wine glass", "glass") in material.cross_forbidden
    assert not material.label_allowed("glass", ["cup", "wine glass"])
    assert material.label_allowed("metal", ["cup", "wine glass"])


def test_family_hash_is_stable_and_config_recorded(color):
    again = load_family("color")
    assert again.sha256 == color.sha256
    assert color.config["attributes"]["entries"][0] == {"name": "red"}


BAD_FAMILIES = [
    ("kind: atribute", "kind", "must be one of attribute, relation"),
    ("n: {min: 0, max: 3}", "n", "1 <= min <= max"),
    ("n: {min: 1, max: 9}", "n.max", "exceeds"),
    ("colour: 3", "colour", "unknown key"),
]


@pytest.mark.parametrize(("edit", "key", "fix"), BAD_FAMILIES)
def test_bad_family_files_name_file_key_and_fix(family_dir, edit, key, fix):
    text = small_attribute_family("bad")
    top_key = edit.split(":")[0]
    lines = [line for line in text.splitlines() if not line.startswith(top_key + ":")]
    path = family_dir("bad", "\n".join(lines) + "\n" + edit + "\n")
    with pytest.raises(UsageError) as err:
        load_family("bad")
    message = str(err.value)
    assert str(path) in message and key in message and fix in message


def test_missing_required_key(family_dir):
    text = small_attribute_family("bad").replace("caption: {suffix:", "captions: {suffix:")
    family_dir("bad", text)
    with pytest.raises(UsageError, match="missing required key"):
        load_family("bad")


def test_duplicate_entry_is_an_error(family_dir):
    text = small_attribute_family("bad").replace("[red, blue, gold", "[red, blue, Red, gold")
    family_dir("bad", text)
    with pytest.raises(UsageError, match=r"duplicate of entries\[0\]"):
        load_family("bad")


def test_never_together_must_name_entries(family_dir):
    family_dir("bad", small_attribute_family("bad").replace("[[lamp, chair]]", "[[lamp, sofa]]"))
    with pytest.raises(UsageError, match="'sofa'.*not a objects entry"):
        load_family("bad")


def test_name_must_match_file(family_dir):
    family_dir("other", small_attribute_family("bad"))
    with pytest.raises(UsageError, match="must equal the file name"):
        load_family("other")


def test_relation_inverse_must_exist(family_dir):
    from tests.conftest import small_relation_family

    family_dir("bad", small_relation_family("bad").replace("inverse: beside", "inverse: near"))
    with pytest.raises(UsageError, match="inverse"):
        load_family("bad")


def test_examples_must_use_the_vocabulary(family_dir):
    family_dir(
        "bad", small_attribute_family("bad").replace("[cup], attributes", "[mug], attributes")
    )
    with pytest.raises(UsageError, match="'mug'.*not a objects entry"):
        load_family("bad")


def test_invalid_yaml(family_dir):
    family_dir("bad", "name: [unclosed\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        load_family("bad")


def test_duplicate_family_names_across_folders(tmp_path, monkeypatch):
    from autocomp.protocol.family import FAMILY_PATH_ENV

    (tmp_path / "color.yaml").write_text(small_attribute_family("color"))
    monkeypatch.setenv(FAMILY_PATH_ENV, str(tmp_path))
    with pytest.raises(UsageError, match="defined once"):
        load_family("color")
