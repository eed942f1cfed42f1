"""The LLM extractor's hidden keywords: the names of who said a memory's evidence, the assistant's
only when the store asks for it."""

from datetime import datetime, timezone

from memlane.domain.models import Message
from memlane.domain.scope import Scope
from memlane.extractors.llm import LLMExtractor
from memlane.prompts.extract import ExtractedMemory, ExtractionResult

T = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)


class OneMemory:
    name = "fake"

    def generate(self, *, system, prompt, response_model):
        return ExtractionResult(memories=[ExtractedMemory(text="Ann starts a new job.", evidence=[0, 2])])


def _msg(mid, role, content, name=None):
    return Message(message_id=mid, scope=Scope(app_id="a"), role=role, content=content, name=name, created_at=T,
                   request_id="r")


TURNS = [_msg("1", "user", "I start a new job on Monday.", "Ann"),
         _msg("2", "user", "My sister moved to Oslo.", "Nate"),
         _msg("3", "assistant", "Congratulations on the job!")]


def test_keywords_name_only_who_said_the_evidence():
    [c] = LLMExtractor(OneMemory()).extract(TURNS)
    assert c.evidence == ["1", "3"] and c.keywords == "Ann"  # not Nate (no evidence), not the assistant


def test_the_assistant_is_named_when_the_store_asks():
    [c] = LLMExtractor(OneMemory()).extract(TURNS, keywords_from_assistant=True)
    assert c.keywords == "Ann Assistant"
