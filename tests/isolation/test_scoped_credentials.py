"""ScopedTables: per-tenant DynamoDB tables signed with tagged STS credentials (moto's STS and DynamoDB).

moto checks who signs a request, not what the policy allows; what the scoped role may do is
checked offline in test_iam_policy.py. Here: that each tenant's table really is signed with
credentials assumed for exactly that tenant's tags, and that they are cached and refreshed.
"""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import boto3
import pytest
from botocore.stub import Stubber

from memlane.adapters.dynamodb.scoped import DEFAULT_REFRESH_BEFORE, ScopedTables, session_name
from memlane.adapters.dynamodb.table import create_table
from memlane.domain.errors import DependencyFailed, InvalidInput, InvalidScope, Retryable
from memlane.repository import tenant_pk

REGION = "us-east-1"
TABLE = "memlane-scoped"
FUNCTION_KEY = "testing"  # the function's own access key id (the environment's)
IAM_DIR = Path(__file__).resolve().parents[2] / "infra" / "iam"
_CREDENTIAL = re.compile(r"Credential=([^/]+)/")


class FakeClock:
    def __init__(self) -> None:
        self.t = datetime.now(timezone.utc)  # moto's credentials expire relative to the real time

    def now(self) -> datetime:
        return self.t

    def advance(self, delta: timedelta) -> None:
        self.t += delta


class Aws:
    """moto, with the scoped role created from the shipped documents, and recorders on the SDK calls."""

    def __init__(self) -> None:
        self.iam = boto3.client("iam", region_name=REGION)
        function_roles = {}
        for name in ("IngestRole", "SearchRole", "TasksRole", "ExtractRole", "DreamRole"):
            function_roles[f"{name}Arn"] = self.iam.create_role(
                RoleName=name, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [{
                    "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                    "Action": "sts:AssumeRole"}]}))["Role"]["Arn"]
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_table(self.dynamodb, TABLE)
        table_arn = self.dynamodb.describe_table(TableName=TABLE)["Table"]["TableArn"]
        # The shipped documents, as the template fills them in; moto validates their syntax.
        trust = _fill((IAM_DIR / "tenant-data-trust.json").read_text(), function_roles)
        policy = _fill((IAM_DIR / "tenant-data-policy.json").read_text(), {"TableArn": table_arn})
        self.role_arn = self.iam.create_role(RoleName="TenantDataRole", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
        self.iam.put_role_policy(RoleName="TenantDataRole", PolicyName="tenant-data", PolicyDocument=policy)

        self.sts = boto3.client("sts", region_name=REGION)
        self.assume_calls: list[dict[str, Any]] = []
        self.issued: list[dict[str, Any]] = []
        self.sts.meta.events.register("before-parameter-build.sts.AssumeRole", self._record_assume)
        self.sts.meta.events.register("after-call.sts.AssumeRole", self._record_issued)

        self.session = boto3.Session()
        self.signed: list[tuple[str, str | None, str | None]] = []  # (operation, access key id, token)
        # First, so it sees the signed request before moto answers it.
        self.session.events.register_first("before-send.dynamodb", self._record_signature)

    def scoped(self, **kwargs: Any) -> ScopedTables:
        return ScopedTables(self.role_arn, TABLE, sts_client=self.sts, session_factory=lambda: self.session,
                            region=REGION, **kwargs)

    def _record_assume(self, params: dict[str, Any], **_: Any) -> None:
        self.assume_calls.append(dict(params))

    def _record_issued(self, parsed: dict[str, Any], **_: Any) -> None:
        self.issued.append(parsed["Credentials"])

    def _record_signature(self, request: Any, **_: Any) -> None:
        auth = request.headers.get("Authorization")
        auth = auth.decode() if isinstance(auth, bytes) else auth
        token = request.headers.get("X-Amz-Security-Token")
        token = token.decode() if isinstance(token, bytes) else token
        match = _CREDENTIAL.search(auth or "")
        target = request.headers.get("X-Amz-Target", "")
        target = target.decode() if isinstance(target, bytes) else target
        self.signed.append((target, match and match.group(1), token))


def _fill(text: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("${" + name + "}", value)
    return text


@pytest.fixture()
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Aws]:
    from moto import mock_aws

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FUNCTION_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield Aws()


def tags_of(call: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in call["Tags"]}


# -- what is asked of STS -----------------------------------------------------------------------


def test_assume_role_carries_exactly_the_three_tags(aws):
    aws.scoped().for_tenant("s", "app", "ann")
    [call] = aws.assume_calls
    assert call["RoleArn"] == aws.role_arn
    assert call["Tags"] == [{"Key": "store", "Value": "s"}, {"Key": "app", "Value": "app"},
                            {"Key": "tenant", "Value": "ann"}]
    assert call["DurationSeconds"] == 900
    assert set(call) == {"RoleArn", "RoleSessionName", "Tags", "DurationSeconds"}  # no policy, no extra tags
    assert re.fullmatch(r"[\w+=,.@-]{2,64}", call["RoleSessionName"])


def test_the_session_name_is_valid_bounded_and_distinct():
    long_id = "x" * 128
    names = {session_name("s", "a:b", "t"), session_name("s", "a_b", "t"), session_name("s", "a", "b.t"),
             session_name("s", "a.b", "t"), session_name("s", long_id, long_id),
             session_name("s", long_id, long_id[:-1] + "y")}
    assert len(names) == 6  # ids that clean up or shorten alike still differ
    for name in names:
        assert re.fullmatch(r"[\w+=,.@-]{2,64}", name, re.ASCII)
    assert session_name("shop", "app", "ann").startswith("shop.app.ann-")  # readable in CloudTrail


# -- what the table is signed with --------------------------------------------------------------


def test_requests_are_signed_with_the_assumed_roles_key(aws):
    table = aws.scoped().for_tenant("s", "app", "ann")
    pk = tenant_pk("s", "app", "ann")
    table.put({"pk": pk, "sk": "MEM#1", "text": "likes tea"})
    assert table.get(pk, "MEM#1")["text"] == "likes tea"
    table.query(pk, prefix="MEM#")
    [issued] = aws.issued
    assert issued["AccessKeyId"].startswith("ASIA")  # temporary credentials
    assert [op for op, _, _ in aws.signed] == ["DynamoDB_20120810.PutItem", "DynamoDB_20120810.GetItem",
                                              "DynamoDB_20120810.Query"]
    assert {(key, token) for _, key, token in aws.signed} == {(issued["AccessKeyId"], issued["SessionToken"])}
    assert FUNCTION_KEY not in {key for _, key, _ in aws.signed}


def test_different_tenants_get_different_credentials(aws):
    scoped = aws.scoped()
    tenants = [("s", "app", "ann"), ("s", "app", "bob"), ("s", "other", "ann"), ("s2", "app", "ann")]
    for store, app_id, tenant_id in tenants:
        scoped.for_tenant(store, app_id, tenant_id).get(tenant_pk(store, app_id, tenant_id), "x")
    assert [tuple(tags_of(c).values()) for c in aws.assume_calls] == tenants
    keys = [c["AccessKeyId"] for c in aws.issued]
    assert len(set(keys)) == len(tenants)
    assert [key for _, key, _ in aws.signed] == keys  # each tenant's request with its own key


# -- caching ------------------------------------------------------------------------------------


def test_credentials_are_cached_per_tenant(aws):
    scoped = aws.scoped()
    first = scoped.for_tenant("s", "app", "ann")
    assert scoped.for_tenant("s", "app", "ann") is first
    first.get(tenant_pk("s", "app", "ann"), "x")
    scoped.for_tenant("s", "app", "ann").get(tenant_pk("s", "app", "ann"), "y")
    assert len(aws.assume_calls) == 1
    assert len({key for _, key, _ in aws.signed}) == 1


def test_credentials_are_refreshed_shortly_before_they_expire(aws):
    clock = FakeClock()
    scoped = aws.scoped(clock=clock)
    first = scoped.for_tenant("s", "app", "ann")
    expires = aws.issued[0]["Expiration"]
    clock.t = expires - DEFAULT_REFRESH_BEFORE - timedelta(seconds=1)
    assert scoped.for_tenant("s", "app", "ann") is first  # still well inside its lifetime
    clock.t = expires - DEFAULT_REFRESH_BEFORE
    second = scoped.for_tenant("s", "app", "ann")
    assert second is not first and len(aws.assume_calls) == 2
    second.get(tenant_pk("s", "app", "ann"), "x")
    assert aws.signed[-1][1] == aws.issued[1]["AccessKeyId"] != aws.issued[0]["AccessKeyId"]


def test_an_expired_tenant_does_not_refresh_the_others():
    clock = FakeClock()
    sts = boto3.client("sts", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(sts)
    for n, lifetime in enumerate([15, 20, 15]):  # ann, bob (assumed 5 minutes later), ann again
        stubber.add_response("assume_role", {"Credentials": {
            "AccessKeyId": f"ASIAEXAMPLE00000000{n}", "SecretAccessKey": "s" * 40, "SessionToken": f"token{n}",
            "Expiration": clock.t + timedelta(minutes=lifetime)}})
    stubber.activate()
    scoped = ScopedTables("arn:aws:iam::123456789012:role/TenantDataRole", TABLE, sts_client=sts, clock=clock)
    ann = scoped.for_tenant("s", "app", "ann")
    bob = scoped.for_tenant("s", "app", "bob")
    clock.advance(timedelta(minutes=15) - DEFAULT_REFRESH_BEFORE)  # ann's are due, bob's have 5 minutes more
    assert scoped.for_tenant("s", "app", "ann") is not ann
    assert scoped.for_tenant("s", "app", "bob") is bob
    stubber.assert_no_pending_responses()


def test_the_cache_is_a_bounded_lru(aws):
    scoped = aws.scoped(max_tenants=2)
    ann = scoped.for_tenant("s", "app", "ann")
    scoped.for_tenant("s", "app", "bob")
    assert scoped.for_tenant("s", "app", "ann") is ann  # ann is now the most recently used
    scoped.for_tenant("s", "app", "cyd")  # evicts bob
    assert len(scoped) == 2 and len(aws.assume_calls) == 3
    assert scoped.for_tenant("s", "app", "ann") is ann
    scoped.for_tenant("s", "app", "bob")
    assert len(aws.assume_calls) == 4


def pause(seconds: float, until: threading.Event | None = None, entered: threading.Event | None = None):
    """A before-call hook that makes STS slow (returning None, so the call goes on)."""
    event = until or threading.Event()

    def hook(**_: Any) -> None:
        if entered is not None:
            entered.set()
        event.wait(seconds)

    return hook


def test_concurrent_calls_for_one_tenant_assume_the_role_once(aws):
    aws.sts.meta.events.register("before-call.sts.AssumeRole", pause(0.2))
    scoped = aws.scoped()
    got: list[Any] = []
    threads = [threading.Thread(target=lambda: got.append(scoped.for_tenant("s", "app", "ann"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(aws.assume_calls) == 1
    assert len(got) == 8 and all(t is got[0] for t in got)


def test_clear_forgets_every_credential(aws):
    scoped = aws.scoped()
    scoped.for_tenant("s", "app", "ann")
    scoped.clear()
    scoped.for_tenant("s", "app", "ann")
    assert len(aws.assume_calls) == 2


# -- refusals and errors ------------------------------------------------------------------------


@pytest.mark.parametrize("store, app_id, tenant_id, error", [
    ("s", "app", "ann#x", InvalidScope),   # a forged delimiter never becomes a tag
    ("s", "app#ann", "x", InvalidScope),
    ("s", "app", "*", InvalidScope),
    ("s", "app", "", InvalidScope),
    ("S#1", "app", "ann", InvalidInput),
    ("s", "app", "a" * 129, InvalidScope),
])
def test_invalid_ids_are_refused_before_sts_is_called(aws, store, app_id, tenant_id, error):
    with pytest.raises(error):
        aws.scoped().for_tenant(store, app_id, tenant_id)
    assert aws.assume_calls == []


def stubbed(code: str, message: str = "no") -> tuple[ScopedTables, Stubber]:
    sts = boto3.client("sts", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(sts)
    stubber.add_client_error("assume_role", service_error_code=code, service_message=message, http_status_code=400)
    stubber.activate()
    return ScopedTables("arn:aws:iam::123456789012:role/TenantDataRole", TABLE, sts_client=sts), stubber


@pytest.mark.parametrize("code", ["Throttling", "RequestLimitExceeded", "ServiceUnavailable", "InternalFailure"])
def test_sts_throttling_is_retryable(code):
    scoped, _ = stubbed(code)
    with pytest.raises(Retryable) as err:
        scoped.for_tenant("s", "app", "ann")
    assert err.value.details["aws_code"] == code


def test_sts_access_denied_is_a_dependency_failure_that_says_what_to_fix():
    scoped, _ = stubbed("AccessDenied", "User is not authorized to perform: sts:TagSession")
    with pytest.raises(DependencyFailed) as err:
        scoped.for_tenant("s", "app", "ann")
    message = err.value.message
    assert "arn:aws:iam::123456789012:role/TenantDataRole" in message
    assert "sts:TagSession" in message and "trust policy" in message


@pytest.mark.parametrize("code", ["RegionDisabledException", "PackedPolicyTooLarge", "MalformedPolicyDocument"])
def test_other_sts_errors_are_dependency_failures(code):
    scoped, _ = stubbed(code)
    with pytest.raises(DependencyFailed) as err:
        scoped.for_tenant("s", "app", "ann")
    assert err.value.details["aws_code"] == code


def test_a_failed_assume_is_not_cached():
    scoped, stubber = stubbed("Throttling")
    with pytest.raises(Retryable):
        scoped.for_tenant("s", "app", "ann")
    expiration = datetime.now(timezone.utc) + timedelta(minutes=15)
    stubber.add_response("assume_role", {"Credentials": {
        "AccessKeyId": "ASIAEXAMPLE000000001", "SecretAccessKey": "s" * 40, "SessionToken": "token",
        "Expiration": expiration}})
    table = scoped.for_tenant("s", "app", "ann")
    assert table.client.meta.region_name == REGION
    assert len(scoped) == 1
    stubber.assert_no_pending_responses()


@pytest.mark.parametrize("kwargs", [{"duration_seconds": 899}, {"duration_seconds": 43_201}, {"max_tenants": 0},
                                    {"refresh_before": timedelta(seconds=900)}])
def test_bad_settings_are_refused(kwargs):
    sts = boto3.client("sts", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with pytest.raises(ValueError):
        ScopedTables("arn:aws:iam::123456789012:role/TenantDataRole", TABLE, sts_client=sts, **kwargs)


def test_assume_role_is_not_slowed_by_another_tenant(aws):
    """One tenant's slow AssumeRole does not hold up a tenant whose credentials are cached."""
    scoped = aws.scoped()
    scoped.for_tenant("s", "app", "bob")
    release, entered = threading.Event(), threading.Event()
    aws.sts.meta.events.register("before-call.sts.AssumeRole", pause(5, release, entered))
    slow = threading.Thread(target=scoped.for_tenant, args=("s", "app", "ann"))
    slow.start()
    try:
        assert entered.wait(5)  # ann's AssumeRole is under way
        started = time.monotonic()
        scoped.for_tenant("s", "app", "bob")
        assert time.monotonic() - started < 1
    finally:
        release.set()
        slow.join()


def test_credentials_handed_to_a_job_outlive_the_longest_function_timeout() -> None:
    """A job binds its tenant's table and index client once, at its start, and keeps them to its end; a cached
    one is handed out until `refresh_before` its expiry. That margin was 180 s against the Extract function's
    300 s: a job started late in a credential's life would meet ExpiredTokenException mid-write (AWS adversarial
    trial: fails before)."""
    from memlane.adapters.dynamodb.scoped import DEFAULT_REFRESH_BEFORE
    from memlane.adapters.opensearch.tenant_auth import RENEW_BEFORE_SECONDS, TOKEN_SECONDS
    from tests.handlers.template import load_template

    longest = max(r["Properties"].get("Timeout", 3) for r in load_template()["Resources"].values()
                  if r["Type"] == "AWS::Serverless::Function")
    assert DEFAULT_REFRESH_BEFORE.total_seconds() > longest
    assert min(RENEW_BEFORE_SECONDS, TOKEN_SECONDS // 2) > longest
