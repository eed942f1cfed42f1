"""The language resources live in one module (memlane.domain.language): no other module of the
package spells out its own stop-word or month list (issue 11, item 5)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import memlane
from memlane.domain import language

PACKAGE = Path(memlane.__file__).parent
HOME = PACKAGE / "domain" / "language.py"
# Lists left where they are, and why.
ELSEWHERE = {
    # English words by frequency rank, to generate a Zipf corpus: an ordering, not words to drop.
    PACKAGE / "bench" / "scale.py",
}
_WORD_LIST = re.compile(r"^[a-z' ]+$")


def _word_lists(tree: ast.AST):
    """Every literal that is a plain list of lower-case words: a string of them or a list/tuple of them."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = " ".join(node.value.split())
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)) and node.elts and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            text = " ".join(e.value for e in node.elts)
        else:
            continue
        if _WORD_LIST.match(text):
            yield node.lineno, set(text.split())


def _offenders(test) -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == HOME or path in ELSEWHERE:
            continue
        for line, words in _word_lists(ast.parse(path.read_text())):
            if test(words):
                found.append(f"{path.relative_to(PACKAGE)}:{line}")
    return found


def test_no_module_but_the_language_module_spells_out_stop_words():
    assert _offenders(lambda words: len(words & language.STOP_WORDS) >= 12) == []


def test_no_module_but_the_language_module_spells_out_month_names():
    assert _offenders(lambda words: {"january", "june", "december"} <= words) == []


def test_the_index_drops_exactly_what_opensearch_english_analyzer_drops():
    # Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET: both keyword backends must rank alike.
    assert language.LUCENE_STOP_WORDS == frozenset(
        "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
        "they this to was will with".split())
    assert language.LUCENE_STOP_WORDS <= language.STOP_WORDS


def test_hidden_keywords_drop_chat_interjections_but_keep_words_of_order():
    assert {"yeah", "wow", "hey"} <= language.CONTEXT_STOP_WORDS
    assert not {"yeah", "wow", "hey"} & language.STOP_WORDS
    assert not {"after", "before", "again"} & language.CONTEXT_STOP_WORDS


def test_months_and_weekdays_in_calendar_order():
    assert language.MONTHS["january"] == 1 and language.MONTHS["december"] == 12 and len(language.MONTHS) == 12
    assert language.MONTH_NAMES.index("may") == 4
    assert language.WEEKDAYS[0] == "monday" and language.WEEKDAYS[-1] == "sunday"


def test_has_phrase_finds_whole_phrases_as_reading_each_one_did() -> None:
    """`has_phrase` reads all phrases in one regex pass; it must answer as testing each phrase on its own
    did: preceded by a space (or the start), followed by a space, comma, period (or the end)."""
    import random

    def each(text: str, phrases: tuple[str, ...]) -> bool:
        low = f" {text.lower()} "
        return any(f" {p} " in low or f" {p}," in low or f" {p}." in low for p in phrases)

    rng = random.Random(4)
    words = ["no", "longer", "gave", "up", "give", "any", "more", "these", "days", "after", "all", "s", "a.b",
             "No", "LONGER", "up,", "more.", "upset", "all!", "days;"]
    for phrases in (language.CHANGE_PHRASES, language.STOP_PHRASES, language.ADDITIVE_PHRASES, ("no longer",),
                    ("a.b", "up")):
        for _ in range(400):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 6)))
            assert language.has_phrase(text, phrases) == each(text, phrases), (text, phrases)


def test_every_aside_phrase_holds_a_mark_so_the_cheap_test_never_hides_one() -> None:
    """`may_hold_aside` spares a text the pattern only when it cannot match: each phrase of the pattern (its
    `\\w+` read as any word, its case any case) holds one of ASIDE_MARKS."""
    phrases = language.ASIDE_TO_LISTENER.pattern.split("(?:")[1].split(")")[0].split("|")
    assert len(phrases) == 19
    for phrase in phrases:
        for word in ("Ann", "x"):
            text = "Well, " + phrase.replace(r"\w+", word).upper() + ", the lease ends."
            assert language.ASIDE_TO_LISTENER.search(text) and language.may_hold_aside(text), phrase
    assert not language.may_hold_aside("Ann lives in Paris, you said?")
    assert language.may_hold_aside("Ann vit à Paris")  # not ASCII: case folding is the pattern's to judge


def test_a_possessive_is_dropped_after_a_word_only() -> None:
    cases = {"Caroline's dog": "Caroline dog", "CAROLINE'S DOG": "CAROLINE DOG", "Ann’s cat": "Ann cat",
             "it's late": "it late", "'s alone": "'s alone", "the cats' toys": "the cats' toys",
             "Ann'sfoo": "Ann'sfoo", "x_'s": "x_", "é's": "é", "a 's b": "a 's b", "Ann''s": "Ann''s"}
    assert {text: language.drop_possessive(text) for text in cases} == cases
