"""Every DynamoDB and STS request the five functions make, judged by template.yaml's IAM policies.

moto does not evaluate IAM, so the offline evaluator (tests/isolation/iam_eval.py) does, request by
request, while the real handlers serve every route family and run every job kind: each signed
DynamoDB request is turned into what IAM authorizes (action, table, `dynamodb:LeadingKeys`; a
transaction item by item) and judged under the policy of whoever signed it: the function's own role
(template.yaml, via tests/isolation/template_policies.py), or the tenant data role with the session
tags its credentials were assumed with. Each AssumeRole is judged against the function's identity
policy and the role's trust. A path that reaches a tenant partition with the function's own
credentials, or the wrong tenant's, fails here as it would fail in production (AccessDenied).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable

import botocore.auth
import pytest

from tests.handlers.conftest import ACCOUNT, TABLE, Aws, Bedrock, parameter_default
from tests.handlers.events import load_event
from tests.isolation import template_policies as tpl
from tests.isolation.iam_eval import Decision, Request, evaluate

HASH_KEYS = {TABLE: "pk"}
TABLE_ARNS = {TABLE: tpl.TABLE_ARN}
TRANSACT_ACTIONS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                    "ConditionCheck": "ConditionCheckItem"}
_KEY_CONDITION = re.compile(r"(#\w+|\w+)\s*=\s*(:\w+)")


def authorized_as(operation: str, body: dict[str, Any]) -> list[Request]:
    """The IAM authorization requests one DynamoDB API call amounts to (principal and tags added later)."""

    def one(action: str, table: str, *keys: dict[str, Any]) -> Request:
        pks = [k[HASH_KEYS[table]]["S"] for k in keys]
        return Request(f"dynamodb:{action}", TABLE_ARNS[table], context={"dynamodb:LeadingKeys": pks})

    if operation in ("GetItem", "DeleteItem", "UpdateItem"):
        return [one(operation, body["TableName"], body["Key"])]
    if operation == "PutItem":
        return [one(operation, body["TableName"], body["Item"])]
    if operation == "Query":
        table = body["TableName"]
        names = body.get("ExpressionAttributeNames", {})
        pks = [body["ExpressionAttributeValues"][value]["S"]
               for name, value in _KEY_CONDITION.findall(body["KeyConditionExpression"])
               if names.get(name, name) == HASH_KEYS[table]]
        resource = TABLE_ARNS[table] + (f"/index/{body['IndexName']}" if "IndexName" in body else "")
        return [Request("dynamodb:Query", resource, context={"dynamodb:LeadingKeys": pks})]
    if operation == "BatchGetItem":
        return [one(operation, table, *spec["Keys"]) for table, spec in body["RequestItems"].items()]
    if operation == "BatchWriteItem":
        return [one(operation, table, *[next(iter(w.values())).get("Key") or next(iter(w.values()))["Item"]
                                        for w in writes]) for table, writes in body["RequestItems"].items()]
    if operation == "TransactWriteItems":
        out = []
        for item in body["TransactItems"]:
            [(kind, spec)] = item.items()
            out.append(one(TRANSACT_ACTIONS[kind], spec["TableName"], spec.get("Key") or spec["Item"]))
        return out
    if operation == "TransactGetItems":
        return [one("GetItem", i["Get"]["TableName"], i["Get"]["Key"]) for i in body["TransactItems"]]
    # Scan, PartiQL, table operations: no partition key at all.
    return [Request(f"dynamodb:{operation}", TABLE_ARNS.get(body.get("TableName", ""), "*"))]


@dataclass
class Judge:
    """Judges each request as it is signed, under the function that is running (None: the test itself)."""

    function: str | None = None
    sessions: dict[str, dict[str, str]] = field(default_factory=dict)  # assumed access key -> session tags
    verdicts: list[tuple[str, str, str, str, Decision]] = field(default_factory=list)  # fn, who, op, keys, decision

    def signed(self, access_key: str, operation: str, body: Any) -> None:
        if self.function is None:
            return  # an operator (the test's own setup), not a function
        if operation == "AssumeRole":
            self._assume(access_key, body)
            return
        tags = self.sessions.get(access_key)
        if tags is None:  # not an assumed session's key: the function's own (the Lambda role's)
            policy, who, principal = tpl.function_role_policy(self.function), "own role", self._role()
        else:
            policy, who, principal = tpl.tenant_data_policy(), "tenant role " + "#".join(tags.values()), None
        for request in authorized_as(operation, body):
            request = Request(request.action, request.resource, principal_tags=tags or {},
                              context=request.context, principal=principal)
            keys = ",".join(request.context.get("dynamodb:LeadingKeys", ["<none>"]))
            self.verdicts.append((self.function, who, request.action, keys, evaluate(policy, request)))

    def _role(self) -> str:
        assert self.function is not None
        return tpl.FUNCTION_ROLES[f"{self.function}Role"]

    def _assume(self, access_key: str, body: str) -> None:
        assert access_key not in self.sessions, "the tenant role is assumed with the function's own credentials"
        form = urllib.parse.parse_qs(body)
        tags = {form[f"Tags.member.{i}.Key"][0]: form[f"Tags.member.{i}.Value"][0]
                for i in range(1, 10) if f"Tags.member.{i}.Key" in form}
        context: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
        context["aws:TagKeys"] = list(tags)
        for action in ("sts:AssumeRole", "sts:TagSession"):
            identity = evaluate(tpl.function_role_policy(self.function),
                                Request(action, tpl.TENANT_ROLE_ARN, principal=self._role()))
            trust = evaluate(tpl.trust_policy(), Request(action, tpl.TENANT_ROLE_ARN, context=context,
                                                         principal=self._role()))
            worst = identity if identity is not Decision.ALLOW else trust
            self.verdicts.append((self.function, "own role", action, json.dumps(tags), worst))

    def denied(self) -> list[tuple[str, str, str, str, Decision]]:
        return [v for v in self.verdicts if v[4] is not Decision.ALLOW]


@pytest.fixture()
def judge(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Judge:
    from memlane.adapters.dynamodb import scoped

    judge = Judge()
    assume = scoped.ScopedTables._assume

    def record(self: scoped.ScopedTables, key: tuple[str, str, str]) -> Any:
        entry = assume(self, key)
        judge.sessions[entry.access_key_id] = dict(zip(("store", "app", "tenant"), key))
        return entry

    monkeypatch.setattr(scoped.ScopedTables, "_assume", record)
    add_auth = botocore.auth.SigV4Auth.add_auth

    def spy(self: botocore.auth.SigV4Auth, request: Any) -> None:
        target = request.headers.get("X-Amz-Target", b"")
        target = target.decode() if isinstance(target, bytes) else target
        body = request.body.decode() if isinstance(request.body, bytes) else (request.body or "")
        if target.startswith("DynamoDB_"):
            judge.signed(self.credentials.access_key, target.split(".")[-1], json.loads(body or "{}"))
        elif "Action=AssumeRole" in body:
            judge.signed(self.credentials.access_key, "AssumeRole", body)
        add_auth(self, request)

    monkeypatch.setattr(botocore.auth.SigV4Auth, "add_auth", spy)
    # No model calls: the hashing embedder, the rules extractor and dream engine, the local reranker.
    for name, value in {"MEMLANE_EMBEDDER": "hashing", "MEMLANE_LLM": "none", "MEMLANE_RERANKER": "heuristic"}.items():
        monkeypatch.setenv(name, value)
    return judge


class Functions:
    """The five handlers, each loaded once (a warm container) and run under the judge's eye."""

    def __init__(self, aws: Aws, judge: Judge):
        self.aws, self.judge = aws, judge
        self.handlers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self.safety_nets: set[str] = set()

    def run(self, function: str, event: dict[str, Any]) -> Any:
        if function not in self.handlers:
            self.handlers[function] = self.aws.load(function.lower())
        self.judge.function = function
        try:
            return self.handlers[function](event)
        finally:
            self.judge.function = None

    def http(self, function: str, method: str, path: str, body: dict[str, Any] | None = None,
             query: dict[str, str] | None = None, expect: int = 200, caller: str | None = None) -> Any:
        event = load_event("ingest", "add")
        event["routeKey"] = event["requestContext"]["routeKey"] = f"{method} {path}"
        event["rawPath"] = event["requestContext"]["http"]["path"] = path
        event["requestContext"]["http"]["method"] = method
        event["rawQueryString"] = urllib.parse.urlencode(query or {})
        event["queryStringParameters"] = query or None
        event["pathParameters"] = None
        event["body"] = json.dumps(body) if body is not None else None
        if caller is not None:
            event["requestContext"]["authorizer"]["iam"]["userArn"] = caller
        response = self.run(function, event)
        assert response["statusCode"] == expect, (method, path, response)
        return json.loads(response["body"]) if response.get("body") else None

    def drain(self) -> int:
        """Run what is queued through the extract function until the queue is empty; the jobs run. Counted
        without the safety-net job of a sync add or dream: it comes due at the request's deadline (some 27 s
        later, in whichever drain that falls) and finds its task finished."""
        done = 0
        for _ in range(10):
            messages = self.aws.queued()
            if not messages:
                return done
            assert self.run("Extract", self.aws.sqs_event(messages)) == {"batchItemFailures": []}
            for m in messages:
                self.aws.sqs.delete_message(QueueUrl=self.aws.queue_url, ReceiptHandle=m["ReceiptHandle"])
            done += sum(json.loads(m["Body"])["request_id"] not in self.safety_nets for m in messages)
        raise AssertionError("the queue did not drain")


SCOPE = {"app_id": "support", "tenant_id": "u-42", "agent_id": "helpdesk", "run_id": "r-1"}
TENANT = {"app_id": "support", "tenant_id": "u-42"}


def add(fn: Functions, request_id: str, text: str, run: str = "r-1", sync: bool = False) -> Any:
    body = {"scope": {**SCOPE, "run_id": run}, "request_id": request_id, "sync": sync,
            "messages": [{"role": "user", "name": "Ann", "content": text}]}
    if sync:
        fn.safety_nets.add(request_id)
    return fn.http("Ingest", "POST", "/v1/stores/demo/memories", body, expect=200 if sync else 202)


def test_every_route_and_job_stays_within_the_template_policies(aws: Aws, bedrock: Bedrock, judge: Judge,
                                                                  granted: None) -> None:
    fn = Functions(aws, judge)
    # Ingest: the store catalog, adds (async, sync, replayed)
    fn.http("Ingest", "POST", "/v1/stores", {"name": "demo"}, expect=201)
    fn.http("Ingest", "GET", "/v1/stores")
    fn.http("Ingest", "GET", "/v1/stores/demo")
    add(fn, "req-1", "I live in Boston.")
    add(fn, "req-1", "I live in Boston.")  # a replay: the service answers it from the task, after the grant check
    add(fn, "req-2", "I adopted a beagle named Max.", run="r-2", sync=True)
    # Extract: the queued extraction
    assert fn.drain() == 1
    add(fn, "req-3", "I moved from Boston to Denver.", run="r-3")
    assert fn.drain() == 1

    # Search: search, memories, messages
    hits = fn.http("Search", "POST", "/v1/stores/demo/search",
                   {"query": "where does Ann live", "scope": {**TENANT, "run_id": "*"}, "include_evidence": True})
    assert hits["results"]
    memory_id = hits["results"][0]["memory_id"]
    fn.http("Search", "GET", "/v1/stores/demo/memories", query=TENANT)
    fn.http("Search", "GET", f"/v1/stores/demo/memories/{memory_id}", query=TENANT)
    fn.http("Search", "PATCH", f"/v1/stores/demo/memories/{memory_id}", {**TENANT, "metadata": {"checked": True}})
    assert fn.drain() == 1  # the job the edit committed, which writes the index again from the table
    fn.http("Search", "GET", "/v1/stores/demo/messages", query=SCOPE)
    card = fn.http("Search", "POST", "/v1/stores/demo/threads/r-1/context", {**TENANT, "query": "where does Ann live"})
    assert card["sections"]["recent"] and card["tokens"]["total"] <= 1500

    # Tasks: task status, lists, scopes, access policy, the audit log
    fn.http("Tasks", "GET", "/v1/stores/demo/tasks/req-1")
    fn.http("Tasks", "GET", "/v1/stores/demo/tasks", query=TENANT)
    fn.http("Tasks", "GET", "/v1/stores/demo/scopes", query=TENANT)
    fn.http("Tasks", "PUT", "/v1/stores/demo/access-policy", {"scope": SCOPE, "access_policy": "recall_and_store"})
    fn.http("Tasks", "GET", "/v1/stores/demo/requests")
    fn.http("Tasks", "GET", "/health")

    # Dream: inline, its tasks and actions, decisions, the profile; queued; scheduled
    task = fn.http("Dream", "POST", "/v1/stores/demo/dream", {"scope": TENANT, "sync": True})
    fn.safety_nets.add(task["task_id"])
    actions = task["actions"]
    assert len(actions) >= 2
    fn.http("Dream", "GET", "/v1/stores/demo/dream-tasks", query=TENANT)
    fn.http("Dream", "GET", f"/v1/stores/demo/dream-tasks/{task['task_id']}")
    fn.http("Dream", "GET", f"/v1/stores/demo/dream-tasks/{task['task_id']}/actions")
    fn.http("Dream", "GET", f"/v1/stores/demo/dream-actions/{actions[0]['action_id']}")
    fn.http("Dream", "POST", f"/v1/stores/demo/dream-actions/{actions[0]['action_id']}/apply")
    fn.http("Dream", "POST", f"/v1/stores/demo/dream-actions/{actions[0]['action_id']}/undo")
    fn.http("Dream", "POST", f"/v1/stores/demo/dream-actions/{actions[1]['action_id']}/reject")
    assert fn.drain() == 2  # the jobs the apply and the undo committed, which write the index again from the table
    fn.http("Ingest", "GET", "/v1/stores/demo/profiles/u-42", query={"app_id": "support"}, expect=404)
    add(fn, "req-4", "I now live in Austin.", run="r-4")
    assert fn.drain() == 1
    assert fn.run("Dream", load_event("dream", "scheduled"))["scheduled"] == 1  # the scope is due again
    assert fn.drain() == 1
    fn.http("Dream", "POST", "/v1/stores/demo/dream", {"scope": TENANT}, expect=202)
    assert fn.drain() == 1

    # Ingest: threads, explicit writes, stated profiles
    fn.http("Ingest", "POST", "/v1/stores/demo/threads", {"thread_id": "t-1", "scope": {**TENANT, "agent_id": "helpdesk"}},
            expect=201)
    fn.http("Ingest", "GET", "/v1/stores/demo/threads/t-1", query=TENANT)
    fn.http("Ingest", "GET", "/v1/stores/demo/threads", query=TENANT)
    fn.http("Ingest", "POST", "/v1/stores/demo/memories",
            {"scope": {**SCOPE, "run_id": "t-1"}, "infer": False, "memories": [{"text": "Locker 12.", "memory_id": "l"}]},
            expect=201)
    assert fn.drain() == 1  # the job the write committed, which writes the index again from the table
    fn.http("Ingest", "PUT", "/v1/stores/demo/profiles/u-42", {"app_id": "support", "text": "Premium customer."})
    fn.http("Ingest", "GET", "/v1/stores/demo/profiles/u-42", query={"app_id": "support"})
    fn.http("Ingest", "PUT", "/v1/stores/demo/agents/helpdesk/profile", {**TENANT, "text": "Be brief."})
    fn.http("Ingest", "GET", "/v1/stores/demo/agents/helpdesk/profile", query=TENANT)
    fn.http("Ingest", "DELETE", "/v1/stores/demo/agents/helpdesk/profile", query=TENANT, expect=204)
    fn.http("Ingest", "DELETE", "/v1/stores/demo/profiles/u-42", query={"app_id": "support"}, expect=204)
    # stated again: the erasure below deletes it
    fn.http("Ingest", "PUT", "/v1/stores/demo/profiles/u-42", {"app_id": "support", "text": "Premium customer."})
    fn.http("Ingest", "DELETE", "/v1/stores/demo/threads/t-1", query=TENANT)

    # A caller without a grant: refused, and audited
    fn.http("Search", "POST", "/v1/stores/demo/search", {"query": "x", "scope": TENANT}, expect=403,
            caller=f"arn:aws:sts::{ACCOUNT}:assumed-role/stranger/s")

    # Sweep: an add that died before its task left its open-task entry and request-id pointer; past the
    # deadline both go, in one transaction of the Tasks function's own.
    for pk, extra in (("demo#~open", {"since": {"S": "2020-01-01T00:00:00+00:00"}}), ("demo#~requests", {})):
        aws.dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": pk}, "sk": {"S": "req-dead#support#u-42"},
                                                     "request_id": {"S": "req-dead"}, "app_id": {"S": "support"},
                                                     "tenant_id": {"S": "u-42"}, **extra})
    assert fn.run("Tasks", load_event("tasks", "sweep"))["closed"] >= 1
    assert [i for pk in ("demo#~open", "demo#~requests") for i in aws.items(pk, "req-dead#")] == []

    # Tasks: an extraction given up on by its last delivery, retried (the task, its open-task entry, its job)
    add(fn, "req-6", "I keep my bike in locker 12.", run="r-6")
    [message] = aws.queued()
    message["Attributes"]["ApproximateReceiveCount"] = str(parameter_default("ExtractMaxReceives"))
    assert fn.run("Extract", aws.sqs_event([message]))["batchItemFailures"]
    aws.sqs.delete_message(QueueUrl=aws.queue_url, ReceiptHandle=message["ReceiptHandle"])  # dead-lettered
    assert fn.http("Tasks", "POST", "/v1/stores/demo/tasks/req-6/retry", expect=202)["status"] == "PENDING"
    assert fn.drain() == 1

    # Deletion: a memory, a run, a tenant (a job), the store (a purge job)
    fn.http("Search", "DELETE", f"/v1/stores/demo/memories/{memory_id}", query=TENANT)
    fn.http("Tasks", "DELETE", "/v1/stores/demo/runs/r-2", query={**TENANT, "agent_id": "helpdesk"})
    # A refused add of the tenant waits in the ingestion queue's dead letters, where a redrive would write it again.
    for tenant in ("u-42", "u-7"):
        aws.sqs.send_message(QueueUrl=aws.ingest_dead_letter_url, MessageBody=json.dumps({
            "store": "demo", "request_id": f"q-{tenant}", "scope": {**TENANT, "tenant_id": tenant},
            "messages": [{"role": "user", "content": "My card number is 4111 1111 1111 1111."}]}))
    erasure = fn.http("Tasks", "POST", "/v1/tenants/erase", TENANT, expect=202)
    assert fn.drain() == 1
    done = fn.http("Tasks", "GET", f"/v1/erasures/{erasure['erasure_id']}")
    assert done["status"] == "SUCCEEDED" and done["dead_letters"] == 1
    assert [json.loads(m["Body"])["scope"]["tenant_id"] for m in aws.queued(aws.ingest_dead_letter_url)] == ["u-7"]
    # A job whose task went with the erasure: dropped, its task looked for with the tenant's credentials.
    from memlane.ports import Job
    aws.sqs.send_message(QueueUrl=aws.queue_url,
                         MessageBody=Job.of_tenant("extract", "demo", "req-gone", "support", "u-42").model_dump_json())
    assert fn.drain() == 1
    add(fn, "req-5", "Bob likes tea.", run="r-5")
    assert fn.drain() == 1
    fn.http("Ingest", "DELETE", "/v1/stores/demo", expect=204)
    assert fn.drain() == 1  # the purge job
    assert aws.items("demo#support#u-42") == []

    assert judge.denied() == []
    # Every function was judged, and every one reached tenant data through the tenant role.
    assert {f for f, who, *_ in judge.verdicts if who == "own role"} == set(tpl.FUNCTIONS)
    assert {f for f, who, *_ in judge.verdicts if who.startswith("tenant role")} == set(tpl.FUNCTIONS)


def test_the_judge_catches_a_tenant_partition_read_with_the_functions_own_credentials(
        aws: Aws, bedrock: Bedrock, judge: Judge) -> None:
    # The judge itself: an unbound repository (the function's own table) reading a tenant's items is denied.
    from memlane import bootstrap
    from memlane.config import Settings

    deps = bootstrap.build(Settings.from_env())
    judge.function = "Search"
    list(deps.repo.tenant_keys("demo", "support", "u-42"))
    judge.function = None
    assert [(f, who, a, k) for f, who, a, k, _ in judge.denied()] == [
        ("Search", "own role", "dynamodb:Query", "demo#support#u-42")]
