"""Thread summaries on the AWS path: POST .../summary on the Search function queues a refresh on SQS, the
Extract function runs it (Bedrock LLM, strict answer, embedding of the summary document), GET .../summary
on the Search function reads it."""

from __future__ import annotations

import json
import uuid

from tests.handlers.conftest import Aws, Bedrock, unit
from tests.handlers.events import load_event, with_body

SUMMARY = "Ann adopted a beagle named Max on 2024-03-09."


def summary_answer(bedrock: Bedrock, answer: dict) -> None:
    """One Converse call answered under toolChoice with the SummaryAnswer tool."""
    bedrock.runtime.add_response("converse", {
        "output": {"message": {"role": "assistant", "content": [{"toolUse": {
            "toolUseId": f"tooluse_{uuid.uuid4().hex[:22]}", "name": "SummaryAnswer", "input": answer}}]}},
        "stopReason": "tool_use", "usage": {"inputTokens": 300, "outputTokens": 40, "totalTokens": 340},
        "metrics": {"latencyMs": 700}})


def test_a_forced_refresh_runs_on_the_extract_function_and_is_read_from_the_search_function(
        aws: Aws, bedrock: Bedrock, granted: None, ingest) -> None:
    create = load_event("ingest", "create_store")
    assert ingest(with_body(create, {**json.loads(create["body"]), "summary_keep_recent": 0}))["statusCode"] == 201
    assert ingest(load_event("ingest", "add"))["statusCode"] == 202
    search = aws.load("search")
    assert search(load_event("search", "summary"))["statusCode"] == 404  # none yet

    accepted = search(load_event("search", "refresh_summary"))
    assert accepted["statusCode"] == 202, accepted
    refresh = json.loads(accepted["body"])
    assert refresh["kind"] == "summarize" and refresh["status"] == "PENDING"

    [job] = [m for m in aws.queued() if json.loads(m["Body"])["kind"] == "summarize"]
    assert json.loads(job["Body"])["run_id"] == "r-2024-03-11"
    summary_answer(bedrock, {"sentences": [{"text": SUMMARY, "messages": [1, 2]}], "open_items": [],
                             "decisions": []})
    bedrock.embedding(SUMMARY, unit(7))  # the summary document's vector
    assert aws.load("extract")(aws.sqs_event([job])) == {"batchItemFailures": []}

    response = search(load_event("search", "summary"))
    assert response["statusCode"] == 200, response
    found = json.loads(response["body"])
    messages = aws.items("demo#support#u-42", "MSG#helpdesk#r-2024-03-11#")
    assert found["text"] == SUMMARY and found["origin"] == "llm"
    assert found["evidence"] == [m["message_id"] for m in messages]
    assert found["covered_messages"] == 2 and found["covered_until"] == messages[-1]["message_id"]
    [task] = aws.items("demo#support#u-42", f"TASK#{refresh['request_id']}")
    assert task["status"] == "SUCCEEDED" and task["kind"] == "summarize"
    [item] = aws.items("demo#support#u-42", "SUM#")
    assert item["version"] == 1
