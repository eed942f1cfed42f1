"""Search's newer-first ranking (policies/conflicts.py): the same order as reading every pair of a search's head word
by word, with the readings memories keep from when they were written or without them."""

import random

import pytest

from memlane.domain.models import ExtractAction
from memlane.policies import conflicts
from memlane.policies.conflicts import newer_first
from memlane.policies.consolidation import Statement, relate
from tests.unit.test_consolidation import _history_texts, memory


def kept(m):
    """The memory as the service writes it: with its reading."""
    return m.model_copy(update={"reading": conflicts.reading(m.text)})


def test_newer_first_moves_a_replacing_memory_before_the_one_it_replaces():
    old = memory("User's apartment is in Brooklyn.", day=0, mid="old")
    other = memory("User has a dog named Rex.", day=3, mid="dog")
    new = memory("User's apartment is in Queens.", day=9, mid="new")
    assert [m.memory_id for m in newer_first([old, other, new])] == ["new", "old", "dog"]
    assert [m.memory_id for m in newer_first([other, old])] == ["dog", "old"]


def test_newer_first_leaves_unrelated_memories_in_their_order():
    jazz = memory("User likes jazz.", day=0, mid="jazz")
    move = memory("User moved to Denver.", day=9, mid="move")
    assert [m.memory_id for m in newer_first([jazz, move])] == ["jazz", "move"]


# -- newer_first at search time: the same order, fewer comparisons -----------------------------------


def _read_in_full(newer, older, similarity):
    """Whether `newer` replaces or denies `older`, each pair read word by word (no reading kept or made)."""
    from memlane.policies.consolidation import Evidence, _comparable, _facts, another_occasion, statement

    new, old = statement(newer.text), statement(older.text)
    if not (_comparable(new, old) and _facts(new, old)):
        return False
    relation = relate(new, old, similarity=similarity)
    if relation is not None and relation.evidence != Evidence.DENIAL \
            and another_occasion(older, old, new, newer.event_time, newer.observed_at):
        return False
    return relation is not None and relation.action in (ExtractAction.UPDATE, ExtractAction.DELETE)


def _reference_newer_first(memories, relevance, window=10):
    """newer_first as it was first written: every pair of the head compared again after each move, and read in
    full."""
    from memlane.policies.consolidation import _is_newer, observed

    head, tail = list(memories[:window]), list(memories[window:])
    i = 0
    while i < len(head):
        for j in range(i + 1, len(head)):
            a, b = head[i], head[j]
            close = min(relevance.get(a.memory_id, 0.0), relevance.get(b.memory_id, 0.0))
            if _is_newer(b, observed(a)) and _read_in_full(b, a, close):
                head.insert(i, head.pop(j))
                break
        else:
            i += 1
    return head + tail


def _update_fixture():
    """Every statement of the knowledge-update set (moves, new jobs, retractions, facts that stay), as
    memories said on scattered days."""
    import json
    import random
    from pathlib import Path

    rnd = random.Random(11)
    texts = [f"User: {m['content']}" for line in (Path(__file__).parents[1] / "data" / "knowledge_updates.jsonl")
             .read_text().splitlines() for step in json.loads(line)["steps"] for m in step["messages"]]
    return [memory(t, day=rnd.randrange(120), mid=f"m{i}") for i, t in enumerate(texts)], rnd


@pytest.mark.parametrize("with_readings", [False, True])
def test_newer_first_keeps_the_order_it_always_gave(with_readings):
    """Without readings (memories written before them, or by other rules) and with the ones writes keep: the order
    of reading every pair in full."""
    memories, rnd = _update_fixture()
    moved = 0
    for _ in range(300):
        hits = rnd.sample(memories, 14)
        relevance = {m.memory_id: rnd.uniform(0.2, 0.9) for m in hits}
        got = [m.memory_id for m in newer_first([kept(m) if with_readings else m for m in hits], relevance)]
        assert got == [m.memory_id for m in _reference_newer_first(hits, relevance)]
        moved += got != [m.memory_id for m in hits]
    assert moved > 10  # the fixture has conflicts to reorder, not only unrelated memories


def test_newer_first_reads_no_pair_that_cannot_replace_the_other(monkeypatch):
    """A remark, a passage, or a statement of someone else cannot replace a fact: such pairs are
    skipped before the word-by-word reading (relate), and a pair already read is not read again."""
    from memlane.policies import consolidation

    read = []
    real = consolidation.relate
    monkeypatch.setattr(consolidation, "relate", lambda new, old, similarity: read.append((new.text, old.text))
                        or real(new, old, similarity))
    hits = [memory("User: Can't wait to see it!", day=0, mid="remark"),
            memory("Ann: I love hiking. We went up Snowdon last week.", day=1, mid="passage"),
            memory("Ben lives in Leeds.", day=2, mid="ben"),
            memory("User's apartment is in Brooklyn.", day=3, mid="old"),
            memory("User's apartment is in Queens.", day=9, mid="new"),
            memory("User: Thanks so much, you're the best!", day=10, mid="thanks")]
    assert [m.memory_id for m in newer_first(hits)] == ["remark", "passage", "ben", "new", "old", "thanks"]
    assert len(read) == len(set(read)) == 1  # only Queens against Brooklyn


def test_statements_a_search_compares_are_read_closely_only_past_the_cheap_gates():
    """A search parses each of its first ten hits (`newer_first`); pairs of different subjects, or said to
    someone, part at `_comparable`, which needs the subject and words alone: the stems, the framing state and
    the values are read on first use, and then exactly as before."""
    from memlane.policies.conflicts import conflicts
    from memlane.policies.consolidation import statement

    statement.cache_clear()
    assert not conflicts(memory("Bob moved to Paris in 2023.", day=1), memory("Ann plays the cello."), 0.9)
    bob = statement("Bob moved to Paris in 2023.")  # as the comparison left it
    assert not {"tokens", "content", "values", "shown", "owner", "entered"} & set(vars(bob))
    assert bob.subject == "bob" and bob.values == {"2023"} and "pari" in bob.content and bob.tokens[0] == "bob"
    assert Statement("Ann's sister got a job as a nurse.").owner == "sist"  # a stem
    assert Statement("Ann got a job as a nurse.").entered and not Statement("Ann is a nurse.").entered



# -- readings kept from write time ------------------------------------------------------------------

@pytest.fixture(scope="module")
def pairs():
    """Pairs of every statement of the knowledge-update histories (as a speaker's line and as a third-person memory):
    10,000 drawn at random, and each whose newer shares no content stem with the older, only a token that shows what
    it is about ("don't" of "User don't eat meat" / "User don't drink alcohol"), rare among random pairs."""
    from memlane.policies.consolidation import _comparable, _facts, statement

    said = [memory(t, day=i % 50, mid=f"m{i}") for i, t in enumerate(_history_texts())]
    rnd = random.Random(5)
    facts = [(m, s) for m in said if (s := statement(m.text)).sentences <= 1 and s.factual and not s.addressed]
    only_a_key = [(newer, older) for newer, n in facts for older, o in facts
                  if newer is not older and _comparable(n, o) and _facts(n, o)
                  and not n.reach[0] & o.content and (n.reach[1] & o.keys) - {n.subject}]
    assert len(only_a_key) > 100
    return [tuple(rnd.sample(said, 2)) for _ in range(_RANDOM_PAIRS)] + only_a_key


_RANDOM_PAIRS = 10_000


@pytest.mark.parametrize("similarity", [0.0, 0.7, 1.0])
def test_a_kept_reading_hides_no_conflict_that_reading_the_pair_finds(pairs, similarity):
    """The readings' verdict (`may_conflict`) never skips a pair the full reading finds a change in — and skips most
    pairs."""
    found = skipped = 0
    for newer, older in pairs:
        full = _read_in_full(newer, older, similarity)
        readings = (conflicts.read(kept(newer)), conflicts.read(kept(older)))
        assert conflicts.conflicts(newer, older, similarity, readings) == full, (newer.text, older.text)
        found += full
        skipped += not conflicts.may_conflict(*readings)
    assert found > 30 and skipped > _RANDOM_PAIRS / 2  # most random pairs (the others share a key by construction)


@pytest.fixture(scope="module")
def sharing_pairs():
    """Pairs of the knowledge-update statements whose newer shares a word with the older: what `_may_change` decides
    (it reads no other pair), drawn at random."""
    from memlane.policies.consolidation import _comparable, _facts, statement

    said = [memory(t, day=i % 50, mid=f"m{i}") for i, t in enumerate(_history_texts())]
    facts = [(m, s) for m in said if (s := statement(m.text)).sentences <= 1 and s.factual and not s.addressed]
    rnd = random.Random(7)
    found = []
    while len(found) < _SHARING_PAIRS:
        (newer, n), (older, o) = rnd.sample(facts, 2)
        if _comparable(n, o) and _facts(n, o) and (n.reach[0] & o.content or (n.reach[1] & o.keys) - {n.subject}):
            found.append((newer, older))
    return found


_SHARING_PAIRS = 15_000
# (newer, older) pairs of those statements that one of `_may_change`'s ways alone lets through to a change: a clause
# negated, a state of each, an end said or a word that calls a plan off (`_READ_THROUGH`).
_ONE_WAY = [("User: my brother and his wife are getting divorced :( feel awful for the kids", "User don't have kids."),
            ("User work as a nurse.", "User: my wife just became a dispatcher too, we work the same center"),
            ("User: My brother Tom is married to Jess.", "User: tom and i are divorced as of last fall"),
            ("User have 4 days off next week, finally.", "User drink 3 coffees a day."),
            ("User: My cat allergy is gone since the immunotherapy.", "User have two cats.")]


@pytest.mark.parametrize("similarity", [0.0, 0.7, 1.0])
def test_pairs_that_share_a_word_are_read_in_full_only_when_they_can_change(sharing_pairs, similarity):
    """A denial, an end, another state, a restatement, another value of the whole or of a clause, a quotation or a
    plan called off: each is let through to the full reading, whose verdict stands (dropping the clauses' frames, the
    negations, the states or `_READ_THROUGH` from `_may_change` each changes some verdict here); pairs that can be
    none of them are not read."""
    skipped = 0
    one_way = [(memory(n, day=9, mid="newer"), memory(o, day=1, mid="older")) for n, o in _ONE_WAY]
    for newer, older in sharing_pairs + one_way:
        readings = (conflicts.read(kept(newer)), conflicts.read(kept(older)))
        assert conflicts.conflicts(newer, older, similarity, readings) == _read_in_full(newer, older, similarity), \
            (newer.text, older.text)
        skipped += not conflicts.may_conflict(*readings)
    assert skipped > _SHARING_PAIRS / 50  # most hold "User's" (a quotation mark), a name, or share most words


def test_a_pair_of_shared_words_and_no_way_to_change_is_not_read(monkeypatch):
    """Two facts of one subject sharing words but neither a cue, a negation, a state, most of their words, nor
    another reading of the text: the pair is told apart by the readings, not read word by word (a search over 10⁵
    memories met ~5 such pairs a search: most of `newer_first`'s time)."""
    from memlane.policies import consolidation

    read = []
    real = consolidation.relate
    monkeypatch.setattr(consolidation, "relate", lambda new, old, similarity: read.append((new.text, old.text))
                        or real(new, old, similarity))
    older = kept(memory("User bakes sourdough bread on weekends with friends from work.", day=0, mid="bread"))
    newer = kept(memory("User keeps a sourdough starter in the fridge at home.", day=9, mid="starter"))
    readings = (conflicts.read(newer), conflicts.read(older))
    assert not readings[0].reach.isdisjoint(readings[1].about)  # they share "sourdough": the first gate lets them by
    assert not conflicts.may_conflict(*readings)
    assert [m.memory_id for m in newer_first([older, newer])] == ["bread", "starter"] and not read
    damaged = newer.model_copy(update={"reading": newer.reading.rsplit(":", 1)[0] + ":AAA"})
    assert conflicts.may_conflict(conflicts.read(damaged), readings[1])  # frames it cannot read: read in full
    assert [m.memory_id for m in newer_first([older, damaged])] == ["bread", "starter"] and read


def test_a_reading_of_another_text_or_other_rules_is_read_again(monkeypatch):
    """A reading is trusted only for the text and the rules that made it: an edit that kept the old reading, or an
    upgrade of the rules, reads the statement again — so a stale reading cannot hide a change."""
    old = memory("User's apartment is in Brooklyn.", day=0, mid="old")
    new = memory("User's apartment is in Queens.", day=9, mid="new")
    stale = new.model_copy(update={"reading": conflicts.reading("User likes jazz.")})
    assert isinstance(conflicts.read(kept(new)), conflicts._Kept)
    assert not isinstance(conflicts.read(stale), conflicts._Kept)
    assert [m.memory_id for m in newer_first([kept(old), stale])] == ["new", "old"]
    ok = kept(new)
    seal = ok.reading.split(":")[0]
    for damaged in (f"{seal}:x:y:z:w:v", f"{seal}:3:zz:AAA::", f"{seal}:3:1f:AAAA::", f"{seal}:3:1f:AAAA:"):
        assert not isinstance(conflicts.read(ok.model_copy(update={"reading": damaged})), conflicts._Kept)
    monkeypatch.setattr(conflicts, "_RULES", b"other rules".ljust(32, b"\0"))
    assert not isinstance(conflicts.read(ok), conflicts._Kept)
    monkeypatch.setattr(conflicts, "_RULES", None)  # an install without the rules' source: nothing kept or trusted
    assert conflicts.reading(new.text) == "" and not isinstance(conflicts.read(ok), conflicts._Kept)


def test_a_subject_whose_hash_is_zero_is_still_a_subject():
    """0 is a reading's "no subject": a name whose CRC32 is 0 ("zorafzjhjju", found by a trial) made every pair of it
    look as if it could not conflict, and the older apartment ranked first."""
    import zlib

    assert zlib.crc32(b"zorafzjhjju") == 0
    old = kept(memory("Zorafzjhjju's apartment is in Brooklyn.", day=0, mid="old"))
    new = kept(memory("Zorafzjhjju's apartment is in Queens.", day=9, mid="new"))
    assert [m.memory_id for m in newer_first([old, new])] == ["new", "old"]


def test_a_run_of_white_space_is_read_as_one_space():
    """A text of a name, ~32,000 spaces and a word took 6 s to read (patterns quadratic in a run of white space), on
    every write that keeps a reading, holding the interpreter from every other request (a trial)."""
    from memlane.policies.statement import statement

    said = statement("Ann" + " " * 32_000 + "moved\n\n\tto   Denver.")
    assert said.text == "Ann moved to Denver." and said.moves


def test_a_long_statement_keeps_no_frames_and_its_pairs_are_read_in_full():
    """CI: a 30,000-character memory's reading with frames was 27 KB, and twenty such rows no longer came back in one
    page of a DynamoDB query. Past `_FRAMED_WORDS` a reading keeps none, and `_may_change` reads such a pair in full."""
    long = "User likes " + " ".join(f"w{i}x" for i in range(conflicts._FRAMED_WORDS + 10)) + "."
    assert conflicts.reading(long).endswith(":") and len(conflicts.reading(long)) < 200
    short = "User lives in Denver and works at Acme."
    assert not conflicts.reading(short).endswith(":")
