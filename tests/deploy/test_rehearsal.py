"""The deploy rehearsal: the stack's flows driven through the built handlers only, each function with its own
environment and role, every AWS call judged by that role's policies (tests/deploy/deployment.py).

The steps run in order and share one stack: create a store -> add (async) -> the message Ingest queued,
delivered to Extract -> task status -> search -> the scheduled dream (the rule's event, as EventBridge sends
it) -> its dream job -> a thread summary refresh and the context card -> a tenant erasure; then every sample
event of events/ against its function; then the verdicts: no call denied, no granted action unused (or kept
for a named reason).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.deploy.deployment import Rehearsal
from tests.deploy.stack import ACCOUNT, REGION, ROOT

pytestmark = pytest.mark.deploy

EVENTS = ROOT / "events"
STORE = "demo"  # the sample events' store
SCOPE = {"app_id": "support", "tenant_id": "u-42"}
# The sample events' caller: an assumed-role session of this role, granted by an operator (memlane grants put).
CALLER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/support-agent"
# The ingestion queue sample's sender (events/ingest/queue.json SenderId): a producer role, granted by its RoleId.
PRODUCER_ROLE_ID = "AROAQX7EXAMPLEPRODUCER"


def event(path: str) -> dict[str, Any]:
    return json.loads((EVENTS / path).read_text())


def http(sample: str, *, path: str | None = None, route: str | None = None, body: Any = None,
         query: str | None = None) -> dict[str, Any]:
    """An HTTP API event made from a sample: its caller, headers and context, another route if asked."""
    e = event(sample)
    if route:
        method, template = route.split(" ", 1)
        e["routeKey"] = e["requestContext"]["routeKey"] = route
        e["requestContext"]["http"]["method"] = method
    if path:
        e["rawPath"] = e["requestContext"]["http"]["path"] = path
        e["pathParameters"] = _path_parameters(e["routeKey"].split(" ", 1)[1], path)
    if body is not None:
        e["body"] = json.dumps(body)
        e["isBase64Encoded"] = False
        e["headers"].update({"content-type": "application/json", "content-length": str(len(e["body"].encode())),
                             "x-amz-content-sha256": hashlib.sha256(e["body"].encode()).hexdigest()})
    if query is not None:
        e["rawQueryString"] = query
        e["queryStringParameters"] = dict(p.split("=", 1) for p in query.split("&")) if query else None
    return e


def _path_parameters(template: str, path: str) -> dict[str, str]:
    return {t[1:-1]: p for t, p in zip(template.split("/"), path.split("/")) if t.startswith("{")}


def body(response: dict[str, Any]) -> Any:
    return json.loads(response.get("body") or "null")


def sqs_event(r: Rehearsal, queue: str = "ExtractQueue") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The batch Lambda's poller would hand the queue's function: the messages waiting, as received."""
    sqs = boto3.client("sqs", region_name=REGION)
    url = r.stack.resolve({"Ref": queue})
    arn = r.stack.resolve({"Fn::GetAtt": [queue, "Arn"]})
    messages: list[dict[str, Any]] = []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageSystemAttributeNames=["All"],
                                  MessageAttributeNames=["All"]).get("Messages", [])
        if not got:
            break
        messages += got
    records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m["Attributes"], "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs", "eventSourceARN": arn, "awsRegion": REGION}
               for m in messages]
    return {"Records": records}, messages


def deliver(r: Rehearsal, queue: str = "ExtractQueue") -> list[dict[str, Any]]:
    """Deliver what waits in the queue to the function its event source mapping names, as the poller does
    (batches of the mapping's size; the records a function reports failed stay, the others are deleted)."""
    mapping = next(res["Properties"] for res in r.stack.of_type("AWS::Lambda::EventSourceMapping").values()
                   if res["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]})
    function = mapping["FunctionName"]["Ref"]
    size = int(r.stack.resolve(mapping.get("BatchSize", 10)))
    event_, messages = sqs_event(r, queue)
    bodies = []
    sqs = boto3.client("sqs", region_name=REGION)
    for start in range(0, len(event_["Records"]), size):
        batch = {"Records": event_["Records"][start:start + size]}
        answer = r.container(function).invoke(batch)
        failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        assert not failed, f"{function} failed records {failed}: {[json.loads(m['body']) for m in batch['Records']]}"
        for record in batch["Records"]:
            sqs.delete_message(QueueUrl=r.stack.resolve({"Ref": queue}), ReceiptHandle=record["receiptHandle"])
            bodies.append(json.loads(record["body"]))
    return bodies


def scheduled_event(r: Rehearsal, rule: str) -> dict[str, Any]:
    """The event an EventBridge schedule rule sends its target."""
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": "Scheduled Event", "source": "aws.events",
            "account": ACCOUNT, "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "region": REGION, "resources": [r.stack.resolve({"Fn::GetAtt": [rule, "Arn"]})], "detail": {}}


@pytest.fixture(scope="module")
def granted(rehearsal: Rehearsal) -> None:
    """The operator grants the samples' caller (memlane grants put), with the operator's credentials."""
    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.services import access

    env = rehearsal.stack.functions["Ingest"].environment
    settings = Settings.from_env(env={**env, "AWS_REGION": REGION, "MEMLANE_INDEX": "embedded",
                                      "MEMLANE_DATA_DIR": str(rehearsal.workdir / "operator")})
    operator = bootstrap.build(settings)
    access.grant(operator, CALLER_ROLE, {"*": ["*"]}, admin=True)
    access.grant(operator, PRODUCER_ROLE_ID, {"support": ["u-42"]})
    _drop_indices(rehearsal)


def _drop_indices(rehearsal: Rehearsal) -> None:
    """The store's indices left on the shared engine by an earlier run, by name."""
    import os
    from urllib.parse import urlparse

    import requests

    url = urlparse(os.environ["MEMLANE_OPENSEARCH_URL"])
    base, login = f"{url.scheme}://{url.hostname}:{url.port}", (url.username or "", url.password or "")
    names = requests.get(f"{base}/_cat/indices/memlane-{STORE}*?format=json&expand_wildcards=all", auth=login,
                         timeout=30).json()
    for name in [i["index"] for i in names if isinstance(i, dict)]:
        requests.delete(f"{base}/{name}", auth=login, timeout=30)


# -- the flows -----------------------------------------------------------------------------------------


def test_every_function_cold_starts_from_its_build(rehearsal: Rehearsal) -> None:
    import memlane

    assert Path(memlane.__file__).is_relative_to(rehearsal.build_dir)
    for logical_id in rehearsal.stack.functions:
        container = rehearsal.container(logical_id)
        assert callable(container.handler)
        assert Path(container.module.__file__).is_relative_to(rehearsal.build_dir / logical_id)


def test_create_store(rehearsal: Rehearsal, granted: None) -> None:
    response = rehearsal.container("Ingest").invoke(event("ingest/create_store.json"))
    assert response["statusCode"] == 201, response
    assert body(response)["name"] == STORE


def test_async_add_queues_a_job_that_extract_runs(rehearsal: Rehearsal, flow: dict[str, Any]) -> None:
    response = rehearsal.container("Ingest").invoke(event("ingest/add.json"))
    assert response["statusCode"] == 202, response
    flow["request_id"] = body(response)["request_id"]
    more = json.loads(event("ingest/add.json")["body"])
    more.update(request_id="req-rehearsal-2", messages=[{
        "role": "user", "name": "Ann", "content": "Max the beagle eats salmon kibble twice a day.",
        "created_at": "2024-03-11T10:02:00Z"}])
    response = rehearsal.container("Ingest").invoke(http("ingest/add.json", body=more))
    assert response["statusCode"] == 202, response
    jobs = deliver(rehearsal)
    assert [j["kind"] for j in jobs] == ["extract", "extract"]
    assert jobs[0]["request_id"] == flow["request_id"]


def test_sync_add_extracts_in_the_request(rehearsal: Rehearsal) -> None:
    sync = json.loads(event("ingest/add.json")["body"])
    sync.update(request_id="req-rehearsal-sync", sync=True, messages=[{
        "role": "user", "name": "Ann", "content": "Ann works night shifts as a nurse in Porto.",
        "created_at": "2024-03-11T10:05:00Z"}])
    response = rehearsal.container("Ingest").invoke(http("ingest/add.json", body=sync))
    assert response["statusCode"] == 200, response
    assert any("nurse" in m["text"] for m in body(response)["memories"]), body(response)


def test_task_status(rehearsal: Rehearsal, flow: dict[str, Any]) -> None:
    rid = flow["request_id"]
    response = rehearsal.container("Tasks").invoke(http("tasks/task_status.json", path=f"/v1/stores/{STORE}/tasks/{rid}"))
    assert response["statusCode"] == 200, response
    task = body(response)
    assert task["status"] == "SUCCEEDED", task
    flow["memory_ids"] = [m["memory_id"] for m in task["memories"]]
    assert any("beagle" in m["text"] for m in task["memories"]), task


def test_search_finds_what_was_extracted(rehearsal: Rehearsal) -> None:
    response = rehearsal.container("Search").invoke(event("search/search.json"))
    assert response["statusCode"] == 200, response
    results = body(response)["results"]
    # More than one candidate, so the Bedrock reranker ran (its order is the scripted model's, not asserted).
    assert any("beagle" in r["text"] for r in results) and len(results) > 1, results


def test_the_scheduled_dream_queues_a_job_that_extract_runs(rehearsal: Rehearsal) -> None:
    dream = rehearsal.stack.functions["Dream"]
    [rule] = [k for k, res in dream.events.items() if res["Type"] == "AWS::Events::Rule"]
    response = rehearsal.container("Dream").invoke(scheduled_event(rehearsal, rule))
    assert response["scheduled"] >= 1, response
    jobs = deliver(rehearsal)
    assert {j["kind"] for j in jobs} == {"dream"}, jobs


def test_summary_refresh_and_context_card(rehearsal: Rehearsal) -> None:
    # The sample thread is two turns: summarise them all rather than keep them as the recent ones.
    response = rehearsal.container("Ingest").invoke(http("ingest/create_store.json", route="PATCH /v1/stores/{store}",
                                                         path=f"/v1/stores/{STORE}", body={"summary_keep_recent": 0}))
    assert response["statusCode"] == 200, response
    search = rehearsal.container("Search")
    response = search.invoke(event("search/refresh_summary.json"))
    assert response["statusCode"] == 202, response
    assert [j["kind"] for j in deliver(rehearsal)] == ["summarize"]
    response = search.invoke(event("search/summary.json"))
    assert response["statusCode"] == 200, response
    response = search.invoke(event("search/context.json"))
    assert response["statusCode"] == 200, response


EDITS = [  # (route, path, query, body): a thread, an access policy, a memory edited and deleted, a run deleted
    ("POST /v1/stores/{store}/threads", f"/v1/stores/{STORE}/threads", "",
     {"thread_id": "t-rehearsal", "scope": {**SCOPE, "agent_id": "helpdesk"}}),
    ("PUT /v1/stores/{store}/access-policy", f"/v1/stores/{STORE}/access-policy", "",
     {"scope": {**SCOPE, "agent_id": "helpdesk", "run_id": "r-other"}, "access_policy": "recall_only"}),
    ("PATCH /v1/stores/{store}/memories/{memory_id}", f"/v1/stores/{STORE}/memories/{{memory}}", "",
     {**SCOPE, "text": "Ann adopted Max, a beagle, on Saturday 9 March 2024."}),
    ("DELETE /v1/stores/{store}/memories/{memory_id}", f"/v1/stores/{STORE}/memories/{{memory}}",
     "app_id=support&tenant_id=u-42", None),
    ("DELETE /v1/stores/{store}/runs/{run_id}", f"/v1/stores/{STORE}/runs/r-other",
     "app_id=support&tenant_id=u-42&agent_id=helpdesk", None),
]


@pytest.mark.parametrize(("route", "path", "query", "payload"), EDITS, ids=[e[0] for e in EDITS])
def test_edits(rehearsal: Rehearsal, flow: dict[str, Any], route: str, path: str, query: str, payload: Any) -> None:
    sample = "search/search.json" if payload is not None else "search/messages.json"
    e = http(sample, route=route, path=path.format(memory=flow["memory_ids"][0]), query=query, body=payload)
    response = rehearsal.container(rehearsal.stack.routes[route]).invoke(e)
    assert 200 <= response["statusCode"] < 300, response
    deliver(rehearsal)


def test_tenant_erasure(rehearsal: Rehearsal, flow: dict[str, Any]) -> None:
    tasks = rehearsal.container("Tasks")
    response = tasks.invoke(http("tasks/task_status.json", route="POST /v1/tenants/erase", path="/v1/tenants/erase",
                                 body=SCOPE))
    assert response["statusCode"] == 202, response
    erasure = body(response)["erasure_id"]
    deliver(rehearsal)
    response = tasks.invoke(http("tasks/task_status.json", route="GET /v1/erasures/{erasure_id}",
                                 path=f"/v1/erasures/{erasure}"))
    assert response["statusCode"] == 200, response
    assert body(response)["status"] in ("SUCCEEDED", "DONE", "COMPLETED"), body(response)
    response = rehearsal.container("Search").invoke(event("search/search.json"))
    assert response["statusCode"] == 200 and body(response)["results"] == [], response


# -- every sample event ---------------------------------------------------------------------------------------

# The order a deployer would send them in: a store, an add, its job, then what reads them.
SAMPLE_ORDER = ["ingest/create_store.json", "ingest/add.json", "ingest/profile.json", "extract/batch.json"]


def samples() -> list[str]:
    found = sorted(str(p.relative_to(EVENTS)) for p in EVENTS.glob("**/*.json"))
    return [s for s in SAMPLE_ORDER if s in found] + [s for s in found if s not in SAMPLE_ORDER]


@pytest.mark.parametrize("sample", samples())
def test_every_sample_event_answers(rehearsal: Rehearsal, sample: str) -> None:
    """Each events/<function>/*.json, against the function whose code is functions/<function>/: 2xx, or a 4xx
    with an error code; an SQS batch with no failed record; a sample HTTP request as API Gateway would have
    accepted it (its body's hash and length in its signed headers)."""
    [function] = [f for f in rehearsal.stack.functions.values() if f.code_dir.name == sample.split("/")[0]]
    e = event(sample)
    if "requestContext" in e:  # the API sends this route to this function
        assert rehearsal.stack.routes.get(e["routeKey"]) == function.logical_id, e["routeKey"]
        raw = (e.get("body") or "").encode()
        assert e["headers"].get("x-amz-content-sha256") == hashlib.sha256(raw).hexdigest(), "x-amz-content-sha256"
        assert int(e["headers"].get("content-length", 0)) == len(raw), "content-length"
    response = rehearsal.container(function.logical_id).invoke(e)
    if "Records" in e:
        assert response == {"batchItemFailures": []}, response
    elif "statusCode" in response:
        assert 200 <= response["statusCode"] < 300 or (
            400 <= response["statusCode"] < 500 and body(response)["error"]["code"]), response
    deliver(rehearsal)  # what a sample queued runs too


# -- more routes, and deleting the store ----------------------------------------------------------------------

QUERY = "app_id=support&tenant_id=u-42"
ROUTES = [  # (route, path, query): reads and edits the flows above did not make
    ("GET /v1/stores", "/v1/stores", ""),
    ("GET /v1/stores/{store}", f"/v1/stores/{STORE}", ""),
    ("GET /v1/stores/{store}/threads", f"/v1/stores/{STORE}/threads", QUERY),
    ("GET /v1/stores/{store}/memories", f"/v1/stores/{STORE}/memories", QUERY),
    ("GET /v1/stores/{store}/tasks", f"/v1/stores/{STORE}/tasks", QUERY),
    ("GET /v1/stores/{store}/scopes", f"/v1/stores/{STORE}/scopes", QUERY),
    ("GET /v1/stores/{store}/requests", f"/v1/stores/{STORE}/requests", ""),
    ("GET /v1/stores/{store}/dream-tasks", f"/v1/stores/{STORE}/dream-tasks", QUERY),
    ("GET /health", "/health", ""),
]


@pytest.mark.parametrize(("route", "path", "query"), ROUTES, ids=[r[0] for r in ROUTES])
def test_more_routes(rehearsal: Rehearsal, route: str, path: str, query: str) -> None:
    function = rehearsal.stack.routes[route]
    response = rehearsal.container(function).invoke(http("search/messages.json", route=route, path=path, query=query))
    assert 200 <= response["statusCode"] < 300, response


def test_delete_store_purges_it(rehearsal: Rehearsal) -> None:
    route = "DELETE /v1/stores/{store}"
    response = rehearsal.container(rehearsal.stack.routes[route]).invoke(
        http("search/messages.json", route=route, path=f"/v1/stores/{STORE}", query=""))
    assert response["statusCode"] in (200, 202, 204), response
    deliver(rehearsal)
    response = rehearsal.container("Ingest").invoke(http("search/messages.json", route="GET /v1/stores/{store}",
                                                         path=f"/v1/stores/{STORE}", query=""))
    assert response["statusCode"] == 404, response


# -- the verdicts -------------------------------------------------------------------------------------------


def test_no_call_was_denied_and_every_caller_was_known(rehearsal: Rehearsal) -> None:
    assert rehearsal.ledger.verdicts, "no AWS call was judged"
    judged = Counter(f"{v.caller.function}{' (tenant)' if v.caller.session_tags else ''} {v.request.action}"
                     for v in rehearsal.ledger.verdicts)
    print(f"{len(rehearsal.ledger.verdicts)} IAM requests judged, {rehearsal.standin.requests} OpenSearch requests "
          f"signature-checked:", *(f"{n:5d}  {k}" for k, n in sorted(judged.items())), sep="\n")
    assert [str(v) for v in rehearsal.ledger.denied] == []
    assert rehearsal.unknown_keys == []
    assert rehearsal.standin.refusals == []
    assert rehearsal.standin.requests > 0


# Granted actions no flow of the rehearsal uses, each kept for the path that needs it. A grant that no flow
# uses and that is not here fails the rehearsal: drive a flow that uses it, or remove it from template.yaml.
G = "GlobalPartitionsOnly"
KEPT = {
    ("Search", G, "dynamodb:Query"): "no Search route queries a global partition; kept because every function "
    "may list its global partitions by contract (tests/isolation/test_iam_policy.py "
    "test_own_global_partitions_with_its_own_credentials)",
    ("Tasks", G, "dynamodb:DeleteItem"): "the sweeper closing the open-task entry of a task it finds finished "
    "(services/sweep.py): no task is stale within the rehearsal",
    ("Tasks", "EmbedReinstated", "bedrock:InvokeModel"): "a run deletion embeds again the memories it makes "
    "current again (services/reinstate.py): the rehearsal's deleted run superseded nothing; "
    "tests/handlers/test_tasks.py makes the call through the Tasks function",
    ("Extract", "ErasureReachesIngestDeadLetters", "sqs:DeleteMessage"): "an erasure deleting its tenant's refused "
    "adds from the ingestion dead letters: the rehearsal's are empty (its erasure reads them through); "
    "tests/handlers/test_iam_enforced.py makes the call through the Extract function",
    ("Extract", "ErasureReachesIngestDeadLetters", "sqs:ChangeMessageVisibility"): "an erasure putting back the "
    "dead letters of other tenants it read: the rehearsal's are empty; tests/handlers/test_iam_enforced.py makes the "
    "call through the Extract function",
    ("Dream", "DreamRole/DreamEventInvokeConfigOnFailureSQSPolicy#0", "sqs:SendMessage"): "Lambda's on-failure "
    "destination of the scheduled run (EventInvokeConfig -> ScheduleFailureQueue, written with the function's "
    "role): the rehearsal invokes synchronously and no scheduled run fails",
}


def test_no_granted_action_is_unused_without_a_reason(rehearsal: Rehearsal) -> None:
    callers = {c.role_arn: c for c, *_ in rehearsal.keys.values() if not c.session_tags}
    unused = rehearsal.ledger.unused(list(callers.values()))
    # A statement without a Sid (SAM's policy templates) is named by its policy: "<policy>#<n>".
    found = {(callers[role].function, f"{policy}{sid}" if sid.startswith("#") else sid, action)
             for role, entries in unused.items() for policy, sid, action in entries}
    for entry in sorted(found):
        print("granted, not used:", *entry, "--", KEPT.get(entry, "NO REASON"))
    assert found - set(KEPT) == set()
