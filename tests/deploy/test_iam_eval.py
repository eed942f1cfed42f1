"""The rehearsal's judge of AWS calls (tests/deploy/iam_eval.py): it must be able to fail.

Each test names a call a function could make and the policy that should (or should not) let it through,
with the shapes template.yaml uses: global partitions by LeadingKeys, transactions item by item, the
tenant role's trust, a cross-Region inference profile.
"""

from __future__ import annotations

from tests.deploy.iam_eval import Call, Caller, Ledger, Policy, model_resources
from tests.isolation.iam_eval import Decision

REGION, ACCOUNT = "us-west-2", "123456789012"
TABLE = "memlane-Table-X"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{TABLE}"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/memlane-IngestRole-X"
TENANT_ROLE = f"arn:aws:iam::{ACCOUNT}:role/memlane-TenantDataRole-X"
PROFILE_MODEL = "global.anthropic.claude-haiku-4-5-20251001-v1:0"

GLOBAL_ONLY = Policy("IngestRole/Policy0", {"Statement": [{
    "Sid": "GlobalPartitionsOnly", "Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:PutItem",
                                                                 "dynamodb:DeleteItem"],
    "Resource": TABLE_ARN,
    "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["~*", "*#~*"]},
                  "Null": {"dynamodb:LeadingKeys": "false"}}}]})


def ddb(operation: str, **params: object) -> Call:
    return Call("dynamodb", operation, params, REGION, ACCOUNT)


def caller(*policies: Policy) -> Caller:
    return Caller("Ingest", ROLE, policies)


def ledger(**resource_policies: list[Policy]) -> Ledger:
    return Ledger({k.replace("_", "/"): v for k, v in resource_policies.items()}, hash_keys={TABLE: "pk"})


def test_a_tenant_partition_outside_the_function_policy_is_reported_denied() -> None:
    judge = ledger()
    [verdict] = judge.decide(caller(GLOBAL_ONLY), ddb("PutItem", TableName=TABLE,
                                                     Item={"pk": {"S": "demo#support#u-42"}, "sk": {"S": "m#1"}}))
    assert verdict.decision is Decision.IMPLICIT_DENY
    assert judge.denied == [verdict]
    assert "dynamodb:PutItem" in str(verdict) and "demo#support#u-42" in str(verdict)


def test_a_global_partition_is_granted_by_the_named_statement_and_action() -> None:
    judge = ledger()
    [verdict] = judge.decide(caller(GLOBAL_ONLY), ddb("GetItem", TableName=TABLE,
                                                     Key={"pk": {"S": "~stores"}, "sk": {"S": "demo"}}))
    assert verdict.decision is Decision.ALLOW
    assert verdict.granted_by == [("IngestRole/Policy0", "GlobalPartitionsOnly", "dynamodb:GetItem")]
    assert judge.denied == []


def test_a_transaction_is_judged_item_by_item() -> None:
    judge = ledger()
    verdicts = judge.decide(caller(GLOBAL_ONLY), ddb("TransactWriteItems", TransactItems=[
        {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "~activity"}, "sk": {"S": "a"}}}},
        {"ConditionCheck": {"TableName": TABLE, "Key": {"pk": {"S": "~stores"}, "sk": {"S": "demo"}}}},
    ]))
    assert [v.request.action for v in verdicts] == ["dynamodb:PutItem", "dynamodb:ConditionCheckItem"]
    assert [v.decision for v in verdicts] == [Decision.ALLOW, Decision.IMPLICIT_DENY]  # no ConditionCheckItem


def test_a_query_is_judged_on_the_partition_key_of_its_key_condition() -> None:
    judge = ledger()
    [verdict] = judge.decide(caller(GLOBAL_ONLY), ddb(
        "Query", TableName=TABLE, KeyConditionExpression="#n0 = :v0 AND begins_with(#n1, :v1)",
        ExpressionAttributeNames={"#n0": "pk", "#n1": "sk"},
        ExpressionAttributeValues={":v0": {"S": "demo#support#u-42"}, ":v1": {"S": "m#"}}))
    assert verdict.request.context["dynamodb:LeadingKeys"] == ["demo#support#u-42"]
    assert verdict.decision is Decision.IMPLICIT_DENY


def test_an_explicit_deny_beats_the_allow() -> None:
    deny = Policy("FunctionRolesPolicy", {"Version": "2012-10-17", "Statement": [{
        "Sid": "GrantsReadOnly", "Effect": "Deny", "Action": "dynamodb:PutItem", "Resource": TABLE_ARN,
        "Condition": {"ForAnyValue:StringEquals": {"dynamodb:LeadingKeys": ["~grants"]}}}]})
    [verdict] = ledger().decide(caller(GLOBAL_ONLY, deny), ddb(
        "PutItem", TableName=TABLE, Item={"pk": {"S": "~grants"}, "sk": {"S": "role"}}))
    assert verdict.decision is Decision.EXPLICIT_DENY


def test_assuming_the_tenant_role_needs_its_trust_to_name_the_caller() -> None:
    may_assume = Policy("FunctionRolesPolicy", {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Action": ["sts:AssumeRole", "sts:TagSession"], "Resource": TENANT_ROLE}]})
    trust_of_another = Policy("TenantDataRole/trust", {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/someone-else"},
        "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
    judge = Ledger({TENANT_ROLE: [trust_of_another]})
    verdicts = judge.decide(caller(may_assume), Call("sts", "AssumeRole", {
        "RoleArn": TENANT_ROLE, "RoleSessionName": "s", "Tags": [{"Key": "tenant", "Value": "u-42"}]}, REGION, ACCOUNT))
    assert [v.request.action for v in verdicts] == ["sts:AssumeRole", "sts:TagSession"]
    assert {v.decision for v in verdicts} == {Decision.IMPLICIT_DENY}


def test_a_global_profile_needs_the_routed_foundation_model_too() -> None:
    profile_only = Policy("IngestRole/Policy0", {"Statement": [{
        "Effect": "Allow", "Action": "bedrock:InvokeModel",
        "Resource": f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{PROFILE_MODEL}"}]})
    verdicts = ledger().decide(caller(profile_only), Call("bedrock", "Converse", {"modelId": PROFILE_MODEL},
                                                          REGION, ACCOUNT))
    assert [v.decision for v in verdicts] == [Decision.ALLOW, Decision.IMPLICIT_DENY]
    assert verdicts[1].request.resource == "arn:aws:bedrock:::foundation-model/anthropic.claude-haiku-4-5-20251001-v1:0"


def test_model_resources_of_a_plain_model_id() -> None:
    assert model_resources("amazon.titan-embed-text-v2:0", REGION, ACCOUNT) == [
        (f"arn:aws:bedrock:{REGION}::foundation-model/amazon.titan-embed-text-v2:0", {})]


def test_granted_actions_no_call_used_are_listed() -> None:
    judge = ledger()
    judge.decide(caller(GLOBAL_ONLY), ddb("GetItem", TableName=TABLE, Key={"pk": {"S": "~stores"}, "sk": {"S": "x"}}))
    assert judge.unused([caller(GLOBAL_ONLY)]) == {ROLE: [
        ("IngestRole/Policy0", "GlobalPartitionsOnly", "dynamodb:PutItem"),
        ("IngestRole/Policy0", "GlobalPartitionsOnly", "dynamodb:DeleteItem")]}
