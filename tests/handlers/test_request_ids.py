"""request_id on the AWS path (moto): a replay runs after authorization — a principal without a grant
replaying a legitimate add gets 403 and no data, and is the one audited; another body under the same id
is 409 request_id_reused; another tenant's use of the same id is its own task, never a 502."""

from __future__ import annotations

import json

from tests.handlers.conftest import ACCOUNT, Aws, Bedrock, unit
from tests.handlers.events import load_event, with_body
from tests.handlers.test_scoped_access import partition_keys, signed  # noqa: F401  (the fixture)

TENANT_PK = "demo#support#u-42"
BEAGLE = "Ann adopted a beagle named Max on 2024-03-09."
INTRUDER = f"arn:aws:sts::{ACCOUNT}:assumed-role/intruder/s1"


def body(response: dict) -> dict:
    return json.loads(response["body"])


def add_event(principal: str | None = None, **changes: object) -> dict:
    event = load_event("ingest", "add")
    event = with_body(event, {**json.loads(event["body"]), **changes})
    if principal is not None:
        event["requestContext"] = json.loads(json.dumps(event["requestContext"]))
        event["requestContext"]["authorizer"]["iam"]["userArn"] = principal
    return event


def audited(aws: Aws) -> list[dict]:
    return aws.items("demo#~audit")


def test_a_replayed_sync_add_from_a_principal_without_a_grant_gets_403_and_no_data(aws: Aws, bedrock: Bedrock,
                                                                                     store: str, ingest) -> None:
    bedrock.extraction([{"text": BEAGLE, "memory_type": "event", "evidence": [0]}])
    bedrock.embedding(BEAGLE, unit(0))
    first = ingest(add_event(sync=True))
    assert first["statusCode"] == 200 and BEAGLE in first["body"]

    replayed = ingest(add_event(INTRUDER, sync=True))

    assert replayed["statusCode"] == 403 and body(replayed)["error"]["code"] == "no_grant"
    assert "beagle" not in replayed["body"].lower() and "req-7f3a9c" not in replayed["body"]
    records = audited(aws)
    assert [(r["principal"], r["status"]) for r in records if r["principal"] == INTRUDER] == [(INTRUDER, 403)]


def test_a_replay_from_a_principal_granted_another_tenant_is_refused(aws: Aws, bedrock: Bedrock, store: str,
                                                                      ingest) -> None:
    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.services import access

    access.grant(bootstrap.build(Settings.from_env()), f"arn:aws:iam::{ACCOUNT}:role/intruder",
                 {"support": ["u-43"]})
    assert ingest(add_event())["statusCode"] == 202

    replayed = ingest(add_event(INTRUDER))

    assert replayed["statusCode"] == 403 and body(replayed)["error"]["code"] == "outside_grant"
    assert "req-7f3a9c" not in replayed["body"]


def test_the_same_body_again_is_answered_with_the_first_task(aws: Aws, store: str, ingest) -> None:
    first = ingest(add_event())
    again = ingest(add_event())

    assert again["statusCode"] == first["statusCode"] == 202
    assert body(again) == body(first) == {"request_id": "req-7f3a9c", "status": "PENDING"}
    assert len(aws.items(TENANT_PK, "TASK#")) == 1 and len(aws.items(TENANT_PK, "MSG#")) == 2


def test_the_same_request_id_with_another_body_is_409_request_id_reused(aws: Aws, store: str, ingest) -> None:
    assert ingest(add_event())["statusCode"] == 202
    before = aws.items(TENANT_PK)

    response = ingest(add_event(messages=[{"role": "user", "content": "I adopted a cat instead."}]))

    assert response["statusCode"] == 409
    assert (body(response)["error"]["code"], body(response)["error"]["field"]) == ("request_id_reused", "request_id")
    assert aws.items(TENANT_PK) == before and len(aws.queued()) == 1


def test_another_tenant_reusing_a_request_id_gets_its_own_task_not_a_502(aws: Aws, store: str, ingest,
                                                                          signed) -> None:
    assert ingest(add_event())["statusCode"] == 202
    signed.clear()

    other = ingest(add_event(scope={"app_id": "support", "tenant_id": "u-43"},
                             messages=[{"role": "user", "content": "I play the cello."}]))

    # Its replay check read only its own partition: with u-43's STS credentials a read of u-42's is an
    # AccessDenied on AWS (moto does not evaluate the policy, so the test looks at the requests).
    touched = {pk for _, op, body in signed if op != "AssumeRole" for pk in partition_keys(body) if "~" not in pk}
    assert touched == {"demo#support#u-43"}

    assert other["statusCode"] == 202, other  # not 502 (AccessDenied on the first tenant's partition), not 409
    assert body(other) == {"request_id": "req-7f3a9c", "status": "PENDING"}
    [mine] = aws.items(TENANT_PK, "TASK#")
    [theirs] = aws.items("demo#support#u-43", "TASK#")
    assert mine["message_ids"] != theirs["message_ids"]
    jobs = sorted((j["tenant_id"], j["request_id"]) for j in (json.loads(m["Body"]) for m in aws.queued()))
    assert jobs == [("u-42", "req-7f3a9c"), ("u-43", "req-7f3a9c")]
