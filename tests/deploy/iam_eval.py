"""Every AWS call a function makes, judged by the IAM policies the deployed stack would give its caller.

A call (service, operation, parameters) is turned into the IAM requests AWS authorizes for it — the action,
the resource ARN and the condition keys the template's policies test (``dynamodb:LeadingKeys`` item by item
for batches and transactions, ``bedrock:InferenceProfileArn`` for a cross-Region profile, the session tags of
``sts:TagSession``, ``es:ESHttp*`` on the domain's path) — and each request is decided with the offline policy
evaluator of the isolation suite (tests/isolation/iam_eval.py: Allow/Deny, wildcards, the Condition operators
the template uses), over the caller's identity policies and, where AWS consults one, the resource's policy
(the tenant role's trust policy, the OpenSearch domain's access policy).

`Ledger` keeps every decision and which statement's action granted it, so the rehearsal can say what was
denied (nothing may be) and which granted actions no call used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tests.isolation.iam_eval import Decision, Request, evaluate

# The AWS managed policies SAM attaches (by ARN) to function roles: their documents as AWS publishes them.
AWS_MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": [
        {"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "*"}],
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess": [
        {"Effect": "Allow", "Action": ["xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
                                       "xray:GetSamplingTargets", "xray:GetSamplingStatisticSummaries"],
         "Resource": "*"}],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": [
        {"Effect": "Allow", "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
                                       "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
         "Resource": "*"}],
}
_TRANSACT_ACTIONS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                     "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}
_KEY_EQUALS = re.compile(r"(#?[\w.-]+)\s*=\s*(:[\w-]+)")


@dataclass(frozen=True)
class Policy:
    """One policy document a principal holds (or a resource's policy), and where it comes from."""

    name: str
    document: Mapping[str, Any]
    ours: bool = True  # written in template.yaml (an AWS managed policy is not)


@dataclass(frozen=True)
class Caller:
    """Who signed a call: a function's role, or a tenant session of the tenant data role."""

    function: str  # the function whose code made the call
    role_arn: str
    policies: tuple[Policy, ...]
    session_tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.function + (f" as tenant {dict(self.session_tags)}" if self.session_tags else "")


@dataclass(frozen=True)
class Call:
    service: str  # botocore's signing name: dynamodb, sqs, sts, bedrock, es
    operation: str
    params: Mapping[str, Any]
    region: str
    account: str


@dataclass
class Verdict:
    caller: Caller
    call: Call
    request: Request
    decision: Decision
    granted_by: list[tuple[str, str, str]]  # (policy, statement id, action pattern)

    def __str__(self) -> str:
        keys = {k: v for k, v in self.request.context.items()}
        return (f"{self.decision.value}: {self.caller.label} {self.call.service}:{self.call.operation} -> "
                f"{self.request.action} on {self.request.resource} {keys}")


class Ledger:
    """Decides calls and remembers every verdict."""

    def __init__(self, resource_policies: Mapping[str, Sequence[Policy]] | None = None,
                 hash_keys: Mapping[str, str] | None = None):
        # resource ARN pattern prefix -> its resource-based policies (trust of a role, a domain's policy)
        self.resource_policies = dict(resource_policies or {})
        self.hash_keys = dict(hash_keys or {})  # table name -> its partition key attribute
        self.verdicts: list[Verdict] = []

    def decide(self, caller: Caller, call: Call) -> list[Verdict]:
        verdicts = [self._decide(caller, call, replace(r, principal=caller.role_arn, principal_tags=caller.session_tags))
                    for r in requests_for(call, self.hash_keys)]
        self.verdicts += verdicts
        return verdicts

    @property
    def denied(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.decision is not Decision.ALLOW]

    def unused(self, callers: Sequence[Caller]) -> dict[str, list[tuple[str, str, str]]]:
        """Per role: the (policy, statement, action) Allow entries of our policies that granted no call."""
        used = {g for v in self.verdicts if v.decision is Decision.ALLOW for g in v.granted_by}
        out: dict[str, list[tuple[str, str, str]]] = {}
        for caller in callers:
            for policy in caller.policies:
                if not policy.ours:
                    continue
                for sid, statement in _statements(policy):
                    if statement["Effect"] != "Allow":
                        continue
                    for action in _as_list(statement["Action"]):
                        if (policy.name, sid, action) not in used:
                            out.setdefault(caller.role_arn, []).append((policy.name, sid, action))
        return out

    def _decide(self, caller: Caller, call: Call, request: Request) -> Verdict:
        identity = _judge(caller.policies, request)
        granted = identity[1]
        resource = [p for prefix, ps in self.resource_policies.items() if request.resource.startswith(prefix)
                    for p in ps]
        decision = identity[0]
        if resource:
            by_resource, granted_by_resource = _judge(resource, request)
            if Decision.EXPLICIT_DENY in (decision, by_resource):
                decision = Decision.EXPLICIT_DENY
            elif request.action.lower().startswith("sts:"):
                # Assuming a role needs its trust policy to allow the caller (and the caller's own policy).
                decision = Decision.ALLOW if decision is by_resource is Decision.ALLOW else Decision.IMPLICIT_DENY
            elif by_resource is Decision.ALLOW:  # same account: either policy may grant it
                decision, granted = Decision.ALLOW, granted + granted_by_resource
        return Verdict(caller, call, request, decision, granted)


def _judge(policies: Sequence[Policy], request: Request) -> tuple[Decision, list[tuple[str, str, str]]]:
    granted: list[tuple[str, str, str]] = []
    denied = False
    for policy in policies:
        version = policy.document.get("Version", "2008-10-17")
        for sid, statement in _statements(policy):
            for action in _as_list(statement["Action"]):
                single = {**statement, "Action": action}
                single.pop("Sid", None)
                outcome = evaluate({"Version": version, "Statement": [single]}, request)
                if outcome is Decision.EXPLICIT_DENY:
                    denied = True
                elif outcome is Decision.ALLOW:
                    granted.append((policy.name, sid, action))
    if denied:
        return Decision.EXPLICIT_DENY, []
    return (Decision.ALLOW if granted else Decision.IMPLICIT_DENY), granted


def _statements(policy: Policy) -> list[tuple[str, dict[str, Any]]]:
    statements = policy.document["Statement"]
    statements = statements if isinstance(statements, list) else [statements]
    return [(s.get("Sid") or f"#{i}", s) for i, s in enumerate(statements)]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


# -- calls -> IAM requests ----------------------------------------------------------------------


def requests_for(call: Call, hash_keys: Mapping[str, str]) -> list[Request]:
    """The IAM requests AWS authorizes for one call."""
    to = {"dynamodb": _dynamodb, "sqs": _sqs, "sts": _sts, "bedrock": _bedrock, "es": _opensearch}
    if call.service not in to:
        raise AssertionError(f"the rehearsal does not know how IAM authorizes {call.service}:{call.operation}")
    return to[call.service](call, hash_keys)


def _dynamodb(call: Call, hash_keys: Mapping[str, str]) -> list[Request]:
    p, op = call.params, call.operation

    def table_arn(name: str, index: str | None = None) -> str:
        arn = name if name.startswith("arn:") else f"arn:aws:dynamodb:{call.region}:{call.account}:table/{name}"
        return arn + (f"/index/{index}" if index else "")

    def pk_of(table: str, key: Mapping[str, Any]) -> str:
        attribute = hash_keys[table.rsplit("/", 1)[-1]]
        return next(iter(key[attribute].values()))

    def request(action: str, table: str, keys: list[str] | None, index: str | None = None) -> Request:
        context = {"dynamodb:LeadingKeys": keys} if keys is not None else {}
        return Request(action=f"dynamodb:{action}", resource=table_arn(table, index), context=context)

    if op in ("GetItem", "DeleteItem", "UpdateItem"):
        return [request(op, p["TableName"], [pk_of(p["TableName"], p["Key"])])]
    if op == "PutItem":
        return [request(op, p["TableName"], [pk_of(p["TableName"], p["Item"])])]
    if op == "Query":
        return [request(op, p["TableName"], [_query_pk(p, hash_keys[p["TableName"].rsplit("/", 1)[-1]])],
                        p.get("IndexName"))]
    if op == "BatchGetItem":
        return [request(op, t, [pk_of(t, k) for k in spec["Keys"]]) for t, spec in p["RequestItems"].items()]
    if op == "BatchWriteItem":
        return [request(op, t, [pk_of(t, next(iter(w.values())).get("Item") or next(iter(w.values()))["Key"])
                                for w in writes]) for t, writes in p["RequestItems"].items()]
    if op in ("TransactWriteItems", "TransactGetItems"):
        out = []
        for item in p["TransactItems"]:
            [(kind, spec)] = item.items()
            out.append(request(_TRANSACT_ACTIONS[kind], spec["TableName"],
                               [pk_of(spec["TableName"], spec.get("Item") or spec["Key"])]))
        return out
    if op == "Scan":
        return [request(op, p["TableName"], None, p.get("IndexName"))]
    return [request(op, p.get("TableName", "*"), None)]


def _query_pk(params: Mapping[str, Any], attribute: str) -> str:
    names = params.get("ExpressionAttributeNames", {})
    for name, value in _KEY_EQUALS.findall(params["KeyConditionExpression"]):
        if names.get(name, name) == attribute:
            return next(iter(params["ExpressionAttributeValues"][value].values()))
    raise AssertionError(f"no partition key equality in {params['KeyConditionExpression']!r}")


def _sqs(call: Call, _: Mapping[str, str]) -> list[Request]:
    url = call.params["QueueUrl"]
    region = re.match(r"https://sqs\.([\w-]+)\.", url)
    account, name = url.rstrip("/").split("/")[-2:]
    arn = f"arn:aws:sqs:{region.group(1) if region else call.region}:{account}:{name}"
    action = "SendMessage" if call.operation == "SendMessageBatch" else call.operation
    return [Request(action=f"sqs:{action}", resource=arn)]


def _sts(call: Call, _: Mapping[str, str]) -> list[Request]:
    if call.operation != "AssumeRole":
        return [Request(action=f"sts:{call.operation}", resource="*")]
    role = call.params["RoleArn"]
    tags = {t["Key"]: t["Value"] for t in call.params.get("Tags", [])}
    # With session tags, both actions are authorized with the tags in the request context.
    context: dict[str, Any] = {f"aws:RequestTag/{k}": v for k, v in tags.items()}
    if tags:
        context["aws:TagKeys"] = list(tags)
    out = [Request(action="sts:AssumeRole", resource=role, context=context)]
    if tags:
        out.append(Request(action="sts:TagSession", resource=role, context=context))
    return out


def model_resources(model: str, region: str, account: str) -> list[tuple[str, dict[str, Any]]]:
    """What InvokeModel is authorized on for a model id, ARN or inference profile: the profile itself and
    the foundation model it routes to (a global profile's destination has no Region in its ARN)."""
    if model.startswith("arn:"):
        kind_id = model.split(":", 5)[5]
        if not kind_id.startswith("inference-profile/"):
            return [(model, {})]
        model = kind_id.split("/", 1)[1]
    geography, _, base = model.partition(".")
    if geography in ("global", "us", "eu", "apac", "us-gov", "ca", "jp", "au") and base.count(".") >= 1:
        profile = f"arn:aws:bedrock:{region}:{account}:inference-profile/{model}"
        routed_region = "" if geography == "global" else region
        return [(profile, {}), (f"arn:aws:bedrock:{routed_region}::foundation-model/{base}",
                                {"bedrock:InferenceProfileArn": profile})]
    return [(f"arn:aws:bedrock:{region}::foundation-model/{model}", {})]


def _bedrock(call: Call, _: Mapping[str, str]) -> list[Request]:
    p = call.params
    if call.operation in ("InvokeModel", "Converse", "InvokeModelWithResponseStream", "ConverseStream"):
        action = "InvokeModelWithResponseStream" if "Stream" in call.operation else "InvokeModel"
        return [Request(action=f"bedrock:{action}", resource=arn, context=context)
                for arn, context in model_resources(p["modelId"], call.region, call.account)]
    if call.operation == "Rerank":
        arn = p["rerankingConfiguration"]["bedrockRerankingConfiguration"]["modelConfiguration"]["modelArn"]
        return [Request(action="bedrock:Rerank", resource="*"),
                *(Request(action="bedrock:InvokeModel", resource=a, context=c)
                  for a, c in model_resources(arn, call.region, call.account))]
    return [Request(action=f"bedrock:{call.operation}", resource="*")]


def _opensearch(call: Call, _: Mapping[str, str]) -> list[Request]:
    """`operation` is the HTTP method; params: domain (name) and path."""
    path = call.params["path"].lstrip("/")
    resource = f"arn:aws:es:{call.region}:{call.account}:domain/{call.params['domain']}/{path}"
    return [Request(action=f"es:ESHttp{call.operation.capitalize()}", resource=resource)]
