import pytest

from autocomp.protocol.contextual import (
    MAX_ATTEMPTS,
    build_prompt,
    check_caption,
    generate_contextual,
    normalize_reply,
    pair_drop,
)
from autocomp.protocol.family import load_all


def scripted(replies):
    """A generator that answers with the given replies in turn, recording what it was asked."""
    asked = []

    def generate(messages, attempt):
        asked.append((messages, attempt))
        return replies[attempt - 1]

    generate.asked = asked
    return generate


def test_prompt_has_system_and_few_shot_user(color):
    messages = build_prompt(color, ["cup", "gloves"], ["red", "green"])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"].startswith("You are an expert image caption writer.")
    assert "MUST include ALL specified objects and their colors" in messages[0]["content"]
    user = messages[1]["content"]
    assert user.rstrip().endswith("Objects: a red cup and a pair of green gloves\nCaption:")
    assert user.count("Caption:") == 1 + len(color.contextual["examples"])


@pytest.mark.parametrize("family", load_all(), ids=lambda f: f.name)
def test_every_few_shot_example_passes_its_own_check(family):
    for ex in family.contextual["examples"]:
        attempt = check_caption(family, ex["objects"], ex["attributes"], ex["caption"])
        assert attempt.verdict == "accepted", attempt.detail


def test_relation_prompt_states_the_chain(position):
    user = build_prompt(position, ["chair", "lamp", "cup"], ["above", "to the left of"])[1][
        "content"
    ]
    assert "Relations: a chair is above a lamp, which is to the left of a cup\nCaption:" in user


@pytest.mark.parametrize(
    ("reply", "caption", "verdict"),
    [
        ("A red cup.", "A red cup.", "ok"),
        ('  "A red cup."  ', "A red cup.", "ok"),
        ("Caption: **A red cup.**", "A red cup.", "ok"),
        ("", None, "empty"),
        ("   \n ", None, "empty"),
        ('""', None, "empty"),
        ("Sure! Here it is:\nA red cup.", None, "multiline"),
        ("A red cup " + "and more " * 60, None, "too_long"),
    ],
)
def test_normalize_reply(reply, caption, verdict):
    got, got_verdict, _ = normalize_reply(reply)
    assert (got, got_verdict) == (caption, verdict)


def test_retry_until_accepted_records_every_attempt(color):
    gen = scripted(["", "A green cup and a red lamp.", "A red cup sits by a green lamp."])
    result = generate_contextual(color, ["cup", "lamp"], ["red", "green"], gen)
    assert result.accepted and result.caption == "A red cup sits by a green lamp."
    assert [a.verdict for a in result.attempts] == ["empty", "missing_binding", "accepted"]
    assert [attempt for _, attempt in gen.asked] == [1, 2, 3]


def test_stops_at_the_first_accepted_reply(color):
    gen = scripted(["A red cup by a green lamp.", "never asked"])
    result = generate_contextual(color, ["cup", "lamp"], ["red", "green"], gen)
    assert len(result.attempts) == 1 and len(gen.asked) == 1


def test_three_failures_drop_the_concept_from_both_conditions(color):
    gen = scripted(["nothing", "A blue cup.", "A red cup, a red lamp and a green lamp."])
    failed = generate_contextual(color, ["cup", "lamp"], ["red", "green"], gen)
    assert not failed.accepted and len(failed.attempts) == MAX_ATTEMPTS
    ok = generate_contextual(
        color, ["cup", "lamp"], ["red", "green"], scripted(["A red cup, a green lamp."])
    )
    assert pair_drop(["c1", "c2"], [failed, ok]) == ["c2"]
    with pytest.raises(ValueError):
        pair_drop(["c1"], [failed, ok])
