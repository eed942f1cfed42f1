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


DOG = "Ann has a dog, a beagle named Max."
EMAIL = "Ann prefers to be contacted by email."


def _two_memories(aws: Aws, bedrock: Bedrock, ingest) -> None:
    """Two memories the query's vector and its words disagree about: the vector prefers EMAIL, the words DOG."""
    assert ingest(load_event("ingest", "add"))["statusCode"] == 202
    bedrock.extraction([{"text": DOG, "memory_type": "fact", "evidence": [0], "importance": 0.8},
                        {"text": EMAIL, "memory_type": "preference", "evidence": [0], "importance": 0.5}])
    bedrock.embedding(DOG, unit(4))
    bedrock.embedding(EMAIL, unit(3))
    assert aws.load("extract")(aws.sqs_event(aws.queued())) == {"batchItemFailures": []}


def _search(aws: Aws, bedrock: Bedrock) -> dict:
    event = load_event("search", "search")
    bedrock.embedding(json.loads(event["body"])["query"], unit(3))
    return aws.load("search")(event)


def test_a_failing_rerank_call_falls_back_to_the_heuristic_reranker(aws: Aws, bedrock: Bedrock, store: str,
                                                                    ingest, capsys) -> None:
    _two_memories(aws, bedrock, ingest)
    with aws.monkeypatch.context() as env:  # the order the local heuristic reranker gives
        env.setenv("MEMLANE_RERANKER", "heuristic")
        heuristic = _search(aws, bedrock)
    capsys.readouterr()

    # Bedrock Rerank refuses (not offered in the Region, model access not granted, an outage ...)
    bedrock.agent.add_client_error("rerank", service_error_code="AccessDeniedException", http_status_code=403,
                                   service_message="You don't have access to the model with the specified model ID.")
    response = _search(aws, bedrock)

    assert response["statusCode"] == 200, response
    texts = [hit["text"] for hit in json.loads(response["body"])["results"]]
    assert texts == [hit["text"] for hit in json.loads(heuristic["body"])["results"]] == [DOG, EMAIL]
    # the metric, in the invocation's EMF blob (the warning: tests/unit/test_rerank_fallback.py)
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert blobs[-1]["service"] == "search" and blobs[-1]["RerankFallback"] == [1.0]
    assert {"Name": "RerankFallback", "Unit": "Count"} in blobs[-1]["_aws"]["CloudWatchMetrics"][0]["Metrics"]


def test_a_working_rerank_call_counts_no_fallback(aws: Aws, bedrock: Bedrock, store: str, ingest, capsys) -> None:
    _two_memories(aws, bedrock, ingest)
    capsys.readouterr()
    bedrock.agent.add_response("rerank", {"results": [{"index": 0, "relevanceScore": 0.9},
                                                      {"index": 1, "relevanceScore": 0.1}]})
    response = _search(aws, bedrock)

    assert response["statusCode"] == 200
    blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert "RerankFallback" not in blobs[-1]
