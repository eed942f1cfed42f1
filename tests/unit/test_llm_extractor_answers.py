"""What the LLM extractor keeps of a model's answer: a model steered by the conversation (or broken) may answer
anything the response model admits — each memory is kept only if it says something, and a time only if the index
and the API can hold it (a trial of the model boundary, with a fake OpenAI-compatible endpoint)."""

from datetime import datetime, timezone

import pytest

from memlane.domain.models import Message
from memlane.domain.scope import Scope
from memlane.extractors.llm import LLMExtractor
from memlane.prompts.extract import ExtractedMemory, ExtractionResult

T = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)
TURN = Message(message_id="1", scope=Scope(app_id="a"), role="user", content="My dentist is on May 2.", name="Ann",
               created_at=T, request_id="r")


class Answers:
    name = "fake"

    def __init__(self, *memories):
        self.memories = memories

    def generate(self, *, system, prompt, response_model):
        return ExtractionResult(memories=list(self.memories))


def test_a_blank_memory_is_not_kept():
    """"   " and a zero-width space pass the schema's length check and were stored as memories "" and "\u200b"."""
    found = LLMExtractor(Answers(ExtractedMemory(text="   ", evidence=[0]),
                                 ExtractedMemory(text="\u200b", evidence=[0]),
                                 ExtractedMemory(text="Ann sees the dentist on May 2.", evidence=[0]))).extract([TURN])
    assert [c.text for c in found] == ["Ann sees the dentist on May 2."]


@pytest.mark.parametrize("said", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "2024-13-40", "soon"])
def test_a_time_out_of_range_in_utc_or_unreadable_is_dropped_and_the_memory_kept(said):
    """A time past year 9999 once in UTC made the add answer 500 after its memories were in the table and before the
    index, and `fsck --repair` died on them."""
    [c] = LLMExtractor(Answers(ExtractedMemory(text="Ann sees the dentist.", evidence=[0], event_time=said))).extract(
        [TURN])
    assert c.text == "Ann sees the dentist." and c.event_time is None


def test_a_time_with_its_offset_is_kept_as_said():
    [c] = LLMExtractor(Answers(ExtractedMemory(text="Ann sees the dentist.", evidence=[0],
                                               event_time="2024-05-02T09:00:00-05:00"))).extract([TURN])
    assert c.event_time.isoformat() == "2024-05-02T09:00:00-05:00"
