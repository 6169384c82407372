"""Minimal captions: the template track of Stage 1.

Attribute families list their objects: "A red chair, a blue cup, and a pair of green gloves on a
white background." Relation families chain them: "A chair is above a table, which is to the left
of a lamp on a white background." The article is chosen by the word that follows it, pair nouns
take "a pair of", and the first letter is capitalised.
"""

from __future__ import annotations

from collections.abc import Sequence

from autocomp.protocol.family import Family
from autocomp.protocol.grammar import capitalize_first, join_list, with_article


def mention(family: Family, obj: str, attribute: str | None = None) -> str:
    """One object as the captions say it: "an orange cup", "a pair of green gloves", "a CD"."""
    entry = family.objects.by_name[obj]
    head = f"{attribute} {obj}" if attribute else obj
    if entry.pair:
        return f"a pair of {head}"
    return with_article(head)


def spec_text(family: Family, objects: Sequence[str], labels: Sequence[str]) -> str:
    """The concept in words without the suffix (used in the minimal caption and LLM prompts)."""
    if not family.is_relation:
        return join_list([mention(family, o, a) for o, a in zip(objects, labels)])
    text = family.caption["first"].format(
        subject=mention(family, objects[0]), relation=labels[0], object=mention(family, objects[1])
    )
    for j in range(1, len(labels)):
        text += family.caption["next"].format(
            relation=labels[j], object=mention(family, objects[j + 1])
        )
    return text


def minimal_caption(family: Family, objects: Sequence[str], labels: Sequence[str]) -> str:
    """The Minimal caption of a concept."""
    return capitalize_first(spec_text(family, objects, labels)) + family.caption["suffix"]
