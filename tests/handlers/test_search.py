"""The search function, end to end across the functions: add -> the real queue message -> extract -> search."""

from __future__ import annotations

import json

from tests.handlers.conftest import Aws, Bedrock, unit
from tests.handlers.events import load_event

BEAGLE = "Ann adopted a beagle named Max on 2024-03-09."


def test_search_finds_the_memory_the_extract_function_wrote(aws: Aws, bedrock: Bedrock, store: str,
                                                            ingest) -> None:
    assert ingest(load_event("ingest", "add"))["statusCode"] == 202
    extract = aws.load("extract")
    bedrock.extraction([{"text": BEAGLE, "memory_type": "event", "evidence": [0], "event_time": "2024-03-09",
                         "importance": 0.8}])
    bedrock.embedding(BEAGLE, unit(3))
    # The job as SQS hands it over: the message ingest sent, received from the queue.
    assert extract(aws.sqs_event(aws.queued())) == {"batchItemFailures": []}

    search = aws.load("search")
    query = json.loads(load_event("search", "search")["body"])["query"]
    bedrock.embedding(query, unit(3))
    response = search(load_event("search", "search"))

    assert response["statusCode"] == 200
    [hit] = json.loads(response["body"])["results"]
    assert hit["text"] == BEAGLE and hit["metadata"] == {"channel": "chat"}
    assert hit["scope"] == {"app_id": "support", "tenant_id": "u-42", "agent_id": "helpdesk",
                                      "run_id": "r-2024-03-11"}
    assert hit["similarity"] == 1.0


def test_messages_are_readable_as_soon_as_add_returns(aws: Aws, bedrock: Bedrock, store: str, ingest) -> None:
    ingest(load_event("ingest", "add"))
    search = aws.load("search")

    response = search(load_event("search", "messages"))

    assert response["statusCode"] == 200
    found = json.loads(response["body"])["messages"]
    assert [(m["role"], m["content"]) for m in found] == [
        ("user", "I adopted a beagle named Max last Saturday."),
        ("assistant", "Congratulations! Beagles are lovely dogs.")]
