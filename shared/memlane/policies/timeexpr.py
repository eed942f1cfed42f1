"""Resolve relative time expressions ("yesterday", "last Saturday", "two weeks ago") against
the time a message was written, so a memory carries an absolute `event_time`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from ..domain.language import DAY_AFTER_MAY, ORDINAL_DAY
from ..domain.language import MONTH_NAMES as _MONTHS
from ..domain.language import WEEKDAYS as _WEEKDAYS
from ..domain.language import past_tense, recurring

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3, "couple of": 2, "few": 3}
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
_NUM = r"(\d+|a couple of|couple of|a few|few|an|a|one|two|three|four|five|six|seven|eight|nine|ten)"


@dataclass(frozen=True)
class ResolvedTime:
    when: datetime
    granularity: str  # "day" | "week" | "month" | "year"
    phrase: str

    def label(self) -> str:
        """Human words for keyword search: '7 May 2023', 'May 2023', '2023'."""
        if self.granularity == "day":
            return f"{self.when.day} {self.when:%B %Y}"
        if self.granularity == "week":
            return f"week of {self.when.day} {self.when:%B %Y}"
        if self.granularity == "month":
            return f"{self.when:%B %Y}"
        return f"{self.when:%Y}"


# A statement about what is to come: "will", "going to", a plan, an arrangement said in the progressive ("is
# flying to Paris in March"), or a plan put off to a day ("got pushed back to March 19"). A month it names without a
# year is the next such month, not the last one.
_AHEAD = re.compile(r"\b(?:will|shall|going to|gonna|plans?|planning|intends?|hopes? to|about to|upcoming|booked|"
                    r"scheduled|looking forward|(?:pushed|postponed|rescheduled|delayed|bumped|rebooked)"
                    r"(?: back| out| up)? (?:to|until|till))\b"
                    r"|(?:\b(?:am|is|are)|['’](?:m|re|s))(?: \w+ly| still)? (?:flying|going|travell?ing|moving|starting|"
                    r"leaving|visiting|getting|running|taking|having|heading|coming)\b|['’]ll\b", re.I)


# A month by name, in any case but "may" (a verb): "March 14", "14th of march", "May 2" — and "may 8" where the day
# cannot be the verb's ("rebooked for may 8").
_MONTH = "(?P<month>(?i:" + "|".join(m for m in _MONTHS if m != "may") + ")|May)"
_YEAR = r"(?:,? (?P<year>(?:19|20)\d\d))?"
_MONTH_AFTER_A_DAY = _MONTH[:-1] + "|(?<=of )may)"  # "14th of may" in lower case too
_DATES = [re.compile(rf"\b{_MONTH}\.? (?P<day>[0-3]?\d)(?:st|nd|rd|th)?\b{_YEAR}"),
          re.compile(rf"\b(?P<day>[0-3]?\d)(?:st|nd|rd|th)? (?:of )?{_MONTH_AFTER_A_DAY}\b{_YEAR}"),
          re.compile(rf"\b(?P<month>may)(?={DAY_AFTER_MAY}) (?P<day>[0-3]?\d)(?:st|nd|rd|th)?\b{_YEAR}")]
# A day of this month or another, as the words point: "the 14th".
_A_DAY_OF_SOME_MONTH = re.compile(ORDINAL_DAY, re.I)
_DAYS = [*_DATES, _A_DAY_OF_SOME_MONTH]


_PUT_OFF_TO = re.compile(r"\b(?:to|until|till) $", re.I)


def to_a_day(text: str) -> bool:
    """A day of a month something is put to ("pushed my flight to March 29", "revised the due date to June 9")."""
    return any(_PUT_OFF_TO.search(text, 0, m.start()) for pattern in _DAYS for m in pattern.finditer(text))


def without_dates(text: str) -> str:
    """`text` without the days of a month it names: what is said of them, not when."""
    for pattern in _DAYS:
        text = pattern.sub("", text)
    return text


def _rules(ref: datetime, ahead: bool = False, past: bool = False,
           habit: bool = False) -> list[tuple[re.Pattern[str], object]]:
    def weekday(match: re.Match[str], direction: int) -> ResolvedTime:
        target = _WEEKDAYS.index(match.group(1).lower())
        delta = (ref.weekday() - target) % 7 or 7
        when = ref - timedelta(days=delta) if direction < 0 else ref + timedelta(days=(target - ref.weekday()) % 7 or 7)
        return ResolvedTime(when, "day", match.group(0))

    def ago(match: re.Match[str]) -> ResolvedTime:
        n = _NUMBERS.get(match.group(1).lower()) or int(match.group(1))
        unit = match.group(2).lower()
        return ResolvedTime(ref - timedelta(days=n * _UNIT_DAYS[unit]), unit, match.group(0))

    def shift(days: int, gran: str):
        return lambda m: ResolvedTime(ref + timedelta(days=days), gran, m.group(0))

    def month(match: re.Match[str]) -> ResolvedTime:
        idx = _MONTHS.index(match.group(2).lower()) + 1
        said = (match.group(1) or "").lower()
        if match.group(3):  # the year said with it: "in March 2027", "September 2024"
            year = int(match.group(3))
        elif ahead and said != "last" or said == "in" and not past and not habit:
            # "is flying to Paris in March", "our wedding is in June": the next one, as a day of a month is (a
            # trial: "my exam is in February", said in December, was dated the February gone) — not a habit
            # ("skiing in February every year": as before)
            year = ref.year if idx >= ref.month else ref.year + 1
        else:  # said of the past: the latest such month up to the message ("in March" said in May: this year's)
            year = ref.year if said != "last" and idx <= ref.month else ref.year - 1
        return ResolvedTime(ref.replace(year=year, month=idx, day=1), "month", match.group(0))

    def date(match: re.Match[str]) -> ResolvedTime | None:
        """A day of a month: of the year said, else the next such day ("the appointment is on March 12": what is said
        of a day is mostly what is to come) — or, said in the past tense, the nearest: a past verb often arranges what
        is to come ("got tickets for the game on March 28", "rebooked my flight for April 25"; a regression trial).
        A day something was put off to ("revised the due date to June 9") is the next whatever the tense."""
        month, day = _MONTHS.index(match.group("month").lower()) + 1, int(match.group("day"))
        years = [int(match.group("year"))] if match.group("year") else [ref.year - 1, ref.year, ref.year + 1]
        try:
            days = [ref.replace(year=y, month=month, day=day) for y in years]
        except ValueError:  # "February 30"
            return None
        return the_day(days, match)

    def day_of_some_month(match: re.Match[str]) -> ResolvedTime | None:
        """"the 14th": of the month before, this one or the next, chosen as a day of a named month is."""
        day, days = int(match.group("day")), []
        for month in (ref.month - 2, ref.month - 1, ref.month):  # 0-based, one either side of this month
            try:
                days.append(ref.replace(year=ref.year + month // 12, month=month % 12 + 1, day=day))
            except ValueError:  # "the 31st" of a shorter month
                pass
        return the_day(days, match) if days else None

    def the_day(days: list[datetime], match: re.Match[str]) -> ResolvedTime | None:
        if len(days) > 1 and not (past and _PUT_OFF_TO.search(match.string, 0, match.start()) is None):
            days = [d for d in days if d.date() >= ref.date()]
        return ResolvedTime(min(days, key=lambda d: abs(d - ref)), "day", match.group(0)) if days else None

    months = "|".join(_MONTHS)
    capitalised = "|".join(m.capitalize() for m in _MONTHS)  # "May 2023", not the verb

    return [
        (re.compile(r"\byesterday\b", re.I), shift(-1, "day")),
        (re.compile(r"\btoday\b|\btonight\b|\bthis (?:morning|afternoon|evening)\b", re.I), shift(0, "day")),
        (re.compile(r"\btomorrow\b", re.I), shift(1, "day")),
        (re.compile(r"\blast (" + "|".join(_WEEKDAYS) + r")\b", re.I), lambda m: weekday(m, -1)),
        (re.compile(r"\bnext (" + "|".join(_WEEKDAYS) + r")\b", re.I), lambda m: weekday(m, 1)),
        (re.compile(r"\b" + _NUM + r" (day|week|month|year)s? ago\b", re.I), ago),
        (re.compile(r"\blast (week)\b|\bthe week before\b", re.I), shift(-7, "week")),
        (re.compile(r"\bnext week\b", re.I), shift(7, "week")),
        (re.compile(r"\blast month\b", re.I), shift(-30, "month")),
        (re.compile(r"\bnext month\b", re.I), shift(30, "month")),
        (re.compile(r"\blast year\b", re.I), shift(-365, "year")),
        (re.compile(r"\bnext year\b", re.I), shift(365, "year")),
        (re.compile(r"\blast weekend\b|\bthis past weekend\b|\bthe weekend\b", re.I),
         lambda m: ResolvedTime(ref - timedelta(days=(ref.weekday() - 5) % 7 or 7), "day", m.group(0))),
        (re.compile(rf"\b(in|last|this) ({months})(?:,? ((?:19|20)\d\d))?\b(?! [0-3]?\d\b)", re.I), month),
        (re.compile(rf"\b()({capitalised}),? ((?:19|20)\d\d)\b"), month),
        *((pattern, date) for pattern in _DATES),
        (_A_DAY_OF_SOME_MONTH, day_of_some_month),
    ]


def resolve(text: str, ref: datetime) -> ResolvedTime | None:
    """The first relative time expression in `text`, resolved against `ref`; None if there is none."""
    best: tuple[int, ResolvedTime] | None = None
    ahead = _AHEAD.search(text) is not None
    for pattern, make in _rules(ref, ahead=ahead, past=not ahead and past_tense(text), habit=recurring(text)):
        match = pattern.search(text)
        if match and (best is None or match.start() < best[0]):
            resolved = make(match)  # type: ignore[operator]
            best = (match.start(), resolved) if resolved is not None else best
    return best[1] if best else None


_BARE_WEEKDAY = re.compile(r"\bon (" + "|".join(_WEEKDAYS) + r")\b", re.I)


def bare_weekday(text: str, ref: datetime, *, past: bool) -> datetime | None:
    """"on Monday" alone, read by the tense of what is said: the last such day before `ref` for what happened, else the
    next. Not a memory's time (a habit and a plan say it too: the extractor leaves it undated) — the day two statements
    are compared by, so that "had an interview at Apple on Monday" is not read as the interview remembered from three
    weeks before, corrected (a trial of plans over time)."""
    match = _BARE_WEEKDAY.search(text)
    if match is None:
        return None
    target = _WEEKDAYS.index(match.group(1).lower())
    if past:
        return ref - timedelta(days=(ref.weekday() - target) % 7 or 7)
    return ref + timedelta(days=(target - ref.weekday()) % 7 or 7)

