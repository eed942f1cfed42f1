from datetime import datetime, timezone

from memlane.domain.models import MemoryType, Message
from memlane.domain.scope import Scope
from memlane.extractors.rules import RuleExtractor, third_person

T = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def msg(content, name="Caroline", role="user", mid="m1"):
    return Message(message_id=mid, scope=Scope(app_id="a"), role=role, content=content, name=name, created_at=T,
                   request_id="r")


def test_speaker_attributed_third_person_with_resolved_date():
    [c] = RuleExtractor().extract([msg("Hey Mel! I went to a support group yesterday and my friends came.")])
    assert c.text == "Caroline went to a support group yesterday and Caroline's friends came."
    assert c.event_time.date().isoformat() == "2023-05-07"
    assert c.memory_type == MemoryType.EVENT
    assert c.evidence == ["m1"]
    assert "8 May 2023" in c.keywords and "7 May 2023" in c.keywords and "Caroline" in c.keywords


def test_small_talk_and_questions_yield_nothing():
    assert RuleExtractor().extract([msg("Hi!"), msg("How are you doing today?"), msg("Thanks, you too!")]) == []


def test_types_are_cued():
    ex = RuleExtractor()
    assert ex.extract([msg("I really love hiking in the mountains.")])[0].memory_type == MemoryType.PREFERENCE
    assert ex.extract([msg("I am planning to visit Japan in the spring.")])[0].memory_type == MemoryType.PLAN
    assert ex.extract([msg("I work as a nurse at the city hospital.")])[0].memory_type == MemoryType.FACT


def test_unnamed_roles_get_a_speaker():
    [c] = RuleExtractor().extract([msg("I prefer window seats on long flights.", name=None)])
    assert c.text.startswith("User prefers") or c.text.startswith("User")


def test_system_and_assistant_messages_ignored():
    assert RuleExtractor().extract([msg("You are a helpful assistant with memory.", role="system")]) == []
    assert RuleExtractor().extract([msg("I will book you a window seat on that flight.", role="assistant")]) == []


def test_third_person_rewrites():
    assert third_person("I'm sure my dog likes me", "Jo") == "Jo is sure Jo's dog likes Jo"


def test_verb_agreement_after_rewrite():
    assert third_person("I work as a nurse and I really love it. I went home.", "Ann") == \
        "Ann works as a nurse and Ann really loves it. Ann went home."
