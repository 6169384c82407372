"""English grammar for generated captions: indefinite articles, list joining, capitalisation.

The article is chosen by the sound of the word that follows it, not by its first letter:
"an orange cup", "a unicycle", "an hour", "an SUV" (ess-you-vee), "a CD" (see-dee).
"""

from __future__ import annotations

import re

# Words that start with a vowel letter but a consonant sound.
_CONSONANT_SOUND_PREFIXES = ("uni", "use", "usa", "usu", "uti", "ura", "ure", "uro", "eu", "ewe")
_CONSONANT_SOUND_WORDS = ("one", "once", "ouija")
# Words that start with a silent h.
_VOWEL_SOUND_H_PREFIXES = ("hour", "honest", "honor", "honour", "heir")
# Letters whose spoken name starts with a vowel sound (for acronyms read letter by letter).
_VOWEL_SOUND_LETTERS = set("AEFHILMNORSX")
# Digits whose spoken name starts with a vowel sound ("an 8", "an 11" is not handled: rare).
_VOWEL_SOUND_DIGITS = set("8")

_WORD = re.compile(r"[A-Za-z0-9]+")


def _is_acronym(word: str) -> bool:
    return len(word) >= 2 and word.isupper() and word.isalpha()


def indefinite_article(phrase: str) -> str:
    """Return "a" or "an" for the phrase that follows the article ("orange cup" -> "an")."""
    match = _WORD.search(phrase)
    if match is None:
        raise ValueError(f"no word to choose an article for in {phrase!r}")
    word = match.group(0)
    if _is_acronym(word):
        return "an" if word[0] in _VOWEL_SOUND_LETTERS else "a"
    if word[0].isdigit():
        return "an" if word[0] in _VOWEL_SOUND_DIGITS else "a"
    lower = word.lower()
    if lower.startswith(_VOWEL_SOUND_H_PREFIXES):
        return "an"
    if lower in _CONSONANT_SOUND_WORDS or lower.startswith(_CONSONANT_SOUND_PREFIXES):
        return "a"
    return "an" if lower[0] in "aeiou" else "a"


def match_case(template: str, text: str) -> str:
    """Give `text` the case of `template`'s first letter (used when an article is rewritten)."""
    if template[:1].isupper():
        return text[:1].upper() + text[1:]
    return text


def with_article(phrase: str) -> str:
    """Prefix the phrase with its indefinite article: "orange cup" -> "an orange cup"."""
    return f"{indefinite_article(phrase)} {phrase}"


def capitalize_first(text: str) -> str:
    """Upper-case the first character only ("an SUV" -> "An SUV"; never lowers the rest)."""
    return text[:1].upper() + text[1:]


def join_list(items: list[str]) -> str:
    """English list: "x", "x and y", "x, y, and z" (serial comma, as in the release captions)."""
    if not items:
        raise ValueError("cannot join an empty list")
    if len(items) == 1:
        return items[0]
    if len(items) == 2:
        return f"{items[0]} and {items[1]}"
    return ", ".join(items[:-1]) + f", and {items[-1]}"
