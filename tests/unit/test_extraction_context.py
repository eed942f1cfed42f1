"""Extraction context: the run's earlier messages inform an add's extraction (a reply's question, a
confirmed statement, a date) without being extracted again; which roles are extracted is the store's."""

from datetime import datetime, timedelta, timezone

import pytest

from memlane.domain.models import ExtractRole, Message
from memlane.domain.scope import Scope
from memlane.extractors.llm import LLMExtractor
from memlane.extractors.rules import RuleExtractor
from memlane.prompts.extract import ExtractedMemory, ExtractionResult

T = datetime(2024, 3, 11, 10, 0, tzinfo=timezone.utc)


def _msg(i, role, content, name=None):
    return Message(message_id=f"m{i}", scope=Scope(app_id="a"), role=role, content=content, name=name,
                   created_at=T + timedelta(minutes=i), request_id=f"r{i}")


CONVO = [
    _msg(1, "user", "We finally closed on the house in Denver last Friday.", "Ann"),
    _msg(2, "assistant", "Congratulations! Did you get the keys yesterday?"),
    _msg(3, "user", "Yes!", "Ann"),
    _msg(4, "assistant", "So the movers are booked for next Saturday at 9am."),
    _msg(5, "user", "Exactly.", "Ann"),
    _msg(6, "assistant", "How is your daughter settling in at the new school?"),
    _msg(7, "user", "She loves it, her teacher says she is already reading chapter books.", "Ann"),
]
# One exchange per add, as a live agent writes: a turn and its reply.
EXCHANGES = [CONVO[0:2], CONVO[2:4], CONVO[4:6], CONVO[6:7]]


def _view(candidates):
    return sorted((c.text, tuple(c.evidence), c.event_time, c.memory_type) for c in candidates)


def _one_exchange_at_a_time(extractor, **kw):
    out = []
    for n, exchange in enumerate(EXCHANGES):
        earlier = [m for ex in EXCHANGES[:n] for m in ex]
        out += extractor.extract(exchange, context=earlier, **kw)
    return out


@pytest.mark.parametrize("roles", [[ExtractRole.USER], [ExtractRole.USER, ExtractRole.ASSISTANT_CONFIRMED]])
def test_one_exchange_at_a_time_extracts_what_the_whole_session_does(roles):
    whole = RuleExtractor().extract(CONVO, roles=roles)
    assert _view(_one_exchange_at_a_time(RuleExtractor(), roles=roles)) == _view(whole)


def test_a_yes_answers_the_question_before_it_and_takes_its_date():
    [c] = RuleExtractor().extract([CONVO[2]], context=CONVO[:2])
    assert c.text == "Ann: Yes! (replying to Assistant: Congratulations! Did you get the keys yesterday?)"
    assert c.evidence == ["m2", "m3"]  # built from the question and the new answer together
    assert c.event_time.date().isoformat() == "2024-03-10"


def test_a_reply_resolves_what_it_refers_to_from_the_question():
    [c] = RuleExtractor().extract([CONVO[6]], context=CONVO[:6])
    assert "daughter" in c.text and "new school" in c.text and c.evidence == ["m6", "m7"]


def test_context_messages_are_never_extracted_again():
    found = RuleExtractor().extract([CONVO[6]], context=CONVO[:6])
    assert all("m7" in c.evidence for c in found)
    assert not any("Denver" in c.text for c in found)  # m1's fact belongs to m1's own add


def test_a_statement_the_user_confirms_is_extracted_only_when_the_store_opts_in():
    assert RuleExtractor().extract([CONVO[4]], context=CONVO[:4]) == []
    [c] = RuleExtractor().extract([CONVO[4]], context=CONVO[:4],
                                  roles=[ExtractRole.USER, ExtractRole.ASSISTANT_CONFIRMED])
    assert c.text == "Ann confirmed: the movers are booked for next Saturday at 9am."
    assert c.evidence == ["m4", "m5"]
    assert c.event_time.date().isoformat() == "2024-03-16"


def test_a_statement_without_confirmation_is_not_a_fact():
    denied = _msg(5, "user", "No, that was cancelled.", "Ann")
    roles = [ExtractRole.USER, ExtractRole.ASSISTANT_CONFIRMED]
    assert not any("movers" in c.text for c in RuleExtractor().extract([denied], context=CONVO[:4], roles=roles))


def test_the_assistant_role_extracts_the_assistant_statements():
    found = RuleExtractor().extract([CONVO[3]], context=CONVO[:3], roles=[ExtractRole.USER, ExtractRole.ASSISTANT])
    assert [c.text for c in found] == ["Assistant: So the movers are booked for next Saturday at 9am."]


class Scripted:
    """An LLM that answers with fixed memories and keeps the prompt it was given."""

    name = "fake"

    def __init__(self, *memories):
        self.memories, self.prompt = list(memories), ""

    def generate(self, *, system, prompt, response_model):
        self.prompt = system + "\n" + prompt
        return ExtractionResult(memories=self.memories)


def test_llm_prompt_marks_the_context_as_context_only():
    llm = Scripted()
    LLMExtractor(llm).extract([CONVO[2]], context=CONVO[:2])
    context_part, new_part = llm.prompt.split("New messages", 1)
    assert "context only" in context_part.lower()
    assert "closed on the house" in context_part and "Yes!" in new_part and "closed on the house" not in new_part
    assert "[-2]" in context_part and "[0]" in new_part  # new messages keep their numbers; earlier ones count back


def test_llm_memories_cite_new_messages_and_context_only_beside_them():
    llm = Scripted(ExtractedMemory(text="Ann closed on a house in Denver.", evidence=[-2]),  # context alone: dropped
                   ExtractedMemory(text="Ann got the keys on 10 March 2024.", evidence=[-1, 0]),
                   ExtractedMemory(text="Ann has a new house.", evidence=[]))  # no citation: the new messages
    found = LLMExtractor(llm).extract([CONVO[2]], context=CONVO[:2])
    assert [(c.text, c.evidence) for c in found] == [("Ann got the keys on 10 March 2024.", ["m2", "m3"]),
                                                     ("Ann has a new house.", ["m3"])]


def test_llm_extracts_only_the_roles_the_store_names():
    said = Scripted(ExtractedMemory(text="The movers come on Saturday.", evidence=[0]))  # the assistant's turn
    assert LLMExtractor(said).extract([CONVO[3]], context=CONVO[:3]) == []
    assert "confirms" not in said.prompt
    opted = Scripted(ExtractedMemory(text="Ann's movers come on 16 March 2024.", evidence=[-1, 0]))
    [c] = LLMExtractor(opted).extract([CONVO[4]], context=CONVO[:4],
                                      roles=[ExtractRole.USER, ExtractRole.ASSISTANT_CONFIRMED])
    assert c.evidence == ["m4", "m5"]
    assert "confirms" in opted.prompt


def test_a_reply_does_not_restate_an_earlier_turn_that_has_its_own_memory():
    """Two people, one exchange per add: Tim's turn got its memory from its own add, so John's reply
    carries only the question it answers — the statement twice would take two places in a search."""
    tim = _msg(1, "user", "I just got back from a week in Rome. Which team did you sign with?", "Tim")
    john = _msg(2, "user", "The Minnesota Wolves!", "John")
    [c] = RuleExtractor().extract([john], context=[tim])
    assert c.text == "John: The Minnesota Wolves! (replying to Tim: Which team did you sign with?)"
    assert c.evidence == ["m2"]
    # Added together, the reply quotes Tim's turn whole and Tim's turn needs no memory of its own.
    [c] = RuleExtractor().extract([tim, john])
    assert c.evidence == ["m1", "m2"] and "Rome" in c.text


def test_a_confirmed_statement_is_told_about_the_user_and_its_tag_question_is_not_a_question():
    roles = [ExtractRole.USER, ExtractRole.ASSISTANT_CONFIRMED]
    stated = _msg(1, "assistant", "I booked you a table at Nopa for Friday, right?")
    [c] = RuleExtractor().extract([_msg(2, "user", "Yes, that's right.", "Ann")], context=[stated], roles=roles)
    assert c.text == "Ann confirmed: Assistant booked Ann a table at Nopa for Friday."
    but = _msg(2, "user", "Yes, but move it to Saturday.", "Ann")
    assert not any("confirmed" in c.text for c in RuleExtractor().extract([but], context=[stated], roles=roles))
