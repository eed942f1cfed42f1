"""The Porter stemmer (M. F. Porter, 1980), as its reference C implementation states it: the variant
SQLite FTS5's `porter` tokenizer and Lucene's `porter_stem` filter implement (so the embedded index and
OpenSearch stem alike; tests/unit/adapters/test_embedded_keyword.py compares it with FTS5 word by word). It keeps
the reference's two departures from the paper (-bli → -ble, -logi → -log) and leaves words of one or
two letters, and of more than 64, alone.
"""

from __future__ import annotations

from functools import lru_cache

_VOWELS = frozenset("aeiou")


class _Word:
    """One word being stemmed: `b[:k + 1]` is the word so far, `j` the end of the stem a suffix test found."""

    __slots__ = ("b", "k", "j")

    def __init__(self, word: str):
        self.b, self.k, self.j = word, len(word) - 1, 0

    def cons(self, i: int) -> bool:
        c = self.b[i]
        if c in _VOWELS:
            return False
        if c == "y":
            return i == 0 or not self.cons(i - 1)
        return True

    def m(self) -> int:
        """The number of vowel-consonant sequences in b[:j + 1]."""
        n, i, j = 0, 0, self.j
        while i <= j and self.cons(i):
            i += 1
        while i <= j:
            while i <= j and not self.cons(i):
                i += 1
            if i > j:
                break
            while i <= j and self.cons(i):
                i += 1
            n += 1
        return n

    def vowel_in_stem(self) -> bool:
        return any(not self.cons(i) for i in range(self.j + 1))

    def double_c(self, i: int) -> bool:
        return i >= 1 and self.b[i] == self.b[i - 1] and self.cons(i)

    def cvc(self, i: int) -> bool:
        return (i >= 2 and self.cons(i) and not self.cons(i - 1) and self.cons(i - 2)
                and self.b[i] not in "wxy")

    def ends(self, s: str) -> bool:
        n = len(s)
        if n > self.k + 1 or self.b[self.k - n + 1:self.k + 1] != s:
            return False
        self.j = self.k - n
        return True

    def set_to(self, s: str) -> None:
        self.b = self.b[:self.j + 1] + s + self.b[self.k + 1:]
        self.k = self.j + len(s)

    def replace(self, s: str) -> None:
        if self.m() > 0:
            self.set_to(s)

    def step1ab(self) -> None:
        if self.b[self.k] == "s":
            if self.ends("sses"):
                self.k -= 2
            elif self.ends("ies"):
                self.set_to("i")
            elif self.b[self.k - 1] != "s":
                self.k -= 1
        if self.ends("eed"):
            if self.m() > 0:
                self.k -= 1
        elif (self.ends("ed") or self.ends("ing")) and self.vowel_in_stem():
            self.k = self.j
            if self.ends("at"):
                self.set_to("ate")
            elif self.ends("bl"):
                self.set_to("ble")
            elif self.ends("iz"):
                self.set_to("ize")
            elif self.double_c(self.k):
                if self.b[self.k - 1] not in "lsz":
                    self.k -= 1
            elif self.m() == 1 and self.cvc(self.k):
                self.set_to("e")

    def step1c(self) -> None:
        if self.ends("y") and self.vowel_in_stem():
            self.b = self.b[:self.k] + "i" + self.b[self.k + 1:]

    def suffixes(self, table: dict[str, tuple[tuple[str, str], ...]], at: int) -> None:
        """The first suffix of the letter's list that ends the word is replaced when m > 0; no other is tried."""
        for suffix, by in table.get(self.b[self.k - at], ()):
            if self.ends(suffix):
                self.replace(by)
                return

    def step4(self) -> None:
        for suffix in _STEP4.get(self.b[self.k - 1], ()):
            if self.ends(suffix):
                if suffix == "ion" and not (self.j >= 0 and self.b[self.j] in "st"):
                    continue  # -ion goes only after s or t; -ou is tried next
                break
        else:
            return
        if self.m() > 1:
            self.k = self.j

    def step5(self) -> None:
        self.j = self.k
        if self.b[self.k] == "e":
            a = self.m()
            if a > 1 or (a == 1 and not self.cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self.double_c(self.k) and self.m() > 1:
            self.k -= 1


_STEP2 = {
    "a": (("ational", "ate"), ("tional", "tion")),
    "c": (("enci", "ence"), ("anci", "ance")),
    "e": (("izer", "ize"),),
    "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
    "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
    "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
    "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
    "g": (("logi", "log"),),
}
_STEP3 = {
    "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
    "i": (("iciti", "ic"),),
    "l": (("ical", "ic"), ("ful", "")),
    "s": (("ness", ""),),
}
_STEP4 = {
    "a": ("al",), "c": ("ance", "ence"), "e": ("er",), "i": ("ic",), "l": ("able", "ible"),
    "n": ("ant", "ement", "ment", "ent"), "o": ("ion", "ou"), "s": ("ism",), "t": ("ate", "iti"),
    "u": ("ous",), "v": ("ive",), "z": ("ize",),
}


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The Porter stem of a lower-case word (one of more than 64 letters is kept whole, as FTS5 keeps it)."""
    if len(word) <= 2 or len(word) > 64:
        return word
    w = _Word(word)
    w.step1ab()
    if w.k > 0:
        w.step1c()
        w.suffixes(_STEP2, 1)
        w.suffixes(_STEP3, 0)
        w.step4()
        w.step5()
    return w.b[:w.k + 1]
