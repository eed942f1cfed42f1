"""Handler tests: the real functions/<name>/app.py modules, invoked with the sample events.

DynamoDB and SQS are moto (`mock_aws`), with the tables and the queue built from template.yaml;
Bedrock is botocore's Stubber on real bedrock-runtime / bedrock-agent-runtime clients (the boundary
the adapters own); the index is the embedded one on a tmp directory (OpenSearch has its own suites).
"""

from __future__ import annotations

import importlib.util
import io
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import boto3
import pytest
from boto3.dynamodb.types import TypeDeserializer
from botocore.response import StreamingBody
from botocore.stub import Stubber

from tests.handlers.template import create_table, load_template, resource

ROOT = Path(__file__).resolve().parents[2]
REGION = "us-west-2"
ACCOUNT = "123456789012"
# The caller of the sample events (an assumed-role session) and the role a grant names.
CALLER_ROLE = f"arn:aws:iam::{ACCOUNT}:role/support-agent"
TABLE = "memlane-test"
DIM = 256  # a Titan V2 dimension; small keeps the stubbed vectors short

_deserializer = TypeDeserializer()


def parameter_default(name: str) -> Any:
    return load_template()["Parameters"][name]["Default"]


@dataclass
class FakeContext:
    """The LambdaContext attributes Powertools reads."""

    function_name: str
    memory_limit_in_mb: int = 1024
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return 29_000


@dataclass
class Aws:
    """The moto account of one test, and how to load a function into it."""

    dynamodb: Any
    sqs: Any
    queue_url: str
    dead_letter_url: str
    ingest_dead_letter_url: str
    monkeypatch: pytest.MonkeyPatch

    def load(self, function: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """Import functions/<function>/app.py afresh (as Lambda does on a cold start) with the function's
        own environment from template.yaml, and return its handler bound to a fake context."""
        logical_id = function.capitalize()
        own = resource(logical_id)["Properties"].get("Environment", {}).get("Variables", {})
        refs = {"Table": TABLE, "ExtractQueue": self.queue_url, "IngestDeadLetterQueue": self.ingest_dead_letter_url}
        with self.monkeypatch.context() as env:
            for key, value in own.items():
                env.setenv(key, refs[value["Ref"]] if isinstance(value, dict) else str(value))
            spec = importlib.util.spec_from_file_location(f"memlane_function_{function}_{uuid.uuid4().hex}",
                                                          ROOT / "functions" / function / "app.py")
            assert spec and spec.loader
            module: ModuleType = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        handler = module.lambda_handler
        return lambda event: handler(event, FakeContext(function_name=f"memlane-{logical_id}"))

    def items(self, pk: str, prefix: str = "") -> list[dict[str, Any]]:
        values = {":pk": {"S": pk}, **({":p": {"S": prefix}} if prefix else {})}
        condition = "pk = :pk" + (" AND begins_with(sk, :p)" if prefix else "")
        resp = self.dynamodb.query(TableName=TABLE, KeyConditionExpression=condition,
                                   ExpressionAttributeValues=values)
        return [{k: _deserializer.deserialize(v) for k, v in i.items()} for i in resp["Items"]]

    def queued(self, queue_url: str | None = None) -> list[dict[str, Any]]:
        """The messages waiting in the queue, received the way Lambda's poller receives them."""
        resp = self.sqs.receive_message(QueueUrl=queue_url or self.queue_url, MaxNumberOfMessages=10,
                                        MessageSystemAttributeNames=["All"], VisibilityTimeout=0)
        return resp.get("Messages", [])

    def sqs_event(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """An SQS event source batch made of messages received from moto."""
        arn = self.sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])
        queue_arn = arn["Attributes"]["QueueArn"]
        return {"Records": [{
            "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
            "attributes": m["Attributes"], "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
            "eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": REGION,
        } for m in messages]}


@pytest.fixture()
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Aws]:
    from moto import mock_aws

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION, "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_METRICS_NAMESPACE": "memlane",
    }.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        create_table(dynamodb, "Table", TABLE)
        sqs = boto3.client("sqs", region_name=REGION)
        queue = resource("ExtractQueue")["Properties"]
        dead = sqs.create_queue(QueueName="memlane-test-dlq")["QueueUrl"]
        dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        url = sqs.create_queue(QueueName="memlane-test-extract", Attributes={
            "VisibilityTimeout": str(queue["VisibilityTimeout"]),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dead_arn,
                                         "maxReceiveCount": parameter_default("ExtractMaxReceives")}),
        })["QueueUrl"]
        # The tenant data role (template.yaml TenantDataRole): tenant partitions are reached with STS
        # credentials tagged with the tenant. moto issues them; it does not evaluate the policy itself
        # (tests/isolation/test_iam_policy.py does, offline).
        iam = boto3.client("iam", region_name=REGION)
        tenant_role = iam.create_role(RoleName="memlane-tenant-data", AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": ACCOUNT},
                                                    "Action": ["sts:AssumeRole", "sts:TagSession"]}]}))
        monkeypatch.setenv("MEMLANE_TENANT_ROLE_ARN", tenant_role["Role"]["Arn"])
        # What the template's Globals give every function, with the index and data dir of this test.
        for name, value in {
            "MEMLANE_MODE": "aws", "MEMLANE_AUTH": "iam", "MEMLANE_TABLE": "dynamodb", "MEMLANE_TABLE_NAME": TABLE,
            "MEMLANE_QUEUE_URL": url, "MEMLANE_INDEX": "embedded", "MEMLANE_DATA_DIR": str(tmp_path / "data"),
            "MEMLANE_EMBEDDER": "bedrock", "MEMLANE_LLM": "bedrock", "MEMLANE_RERANKER": "bedrock",
            "MEMLANE_BEDROCK_EMBED_MODEL": parameter_default("EmbeddingModelId"),
            "MEMLANE_BEDROCK_LLM_MODEL": parameter_default("LlmModelId"),
            "MEMLANE_BEDROCK_RERANK_MODEL": parameter_default("RerankModelId"),
            "MEMLANE_EMBED_DIM": str(DIM), "MEMLANE_LOG_LEVEL": "INFO",
            "MEMLANE_WORKER_MAX_ATTEMPTS": str(parameter_default("ExtractMaxReceives")),
        }.items():
            monkeypatch.setenv(name, value)
        ingest_dead = sqs.create_queue(QueueName="memlane-test-ingest-dlq")["QueueUrl"]
        yield Aws(dynamodb=dynamodb, sqs=sqs, queue_url=url, dead_letter_url=dead, ingest_dead_letter_url=ingest_dead,
                  monkeypatch=monkeypatch)


# -- Bedrock: Stubber on real clients ----------------------------------------------------------


@dataclass
class Bedrock:
    runtime: Stubber  # bedrock-runtime: InvokeModel (Titan), Converse (LLM)
    agent: Stubber  # bedrock-agent-runtime: Rerank
    said: set[str]  # what the test's adds said: their embeddings are answered unless scripted

    def embedding(self, text: str, vector: list[float]) -> None:
        """One Titan Text Embeddings V2 InvokeModel call for `text`, answered with `vector`."""
        body = json.dumps({"embedding": vector, "inputTextTokenCount": len(text.split())}).encode()
        self.runtime.add_response(
            "invoke_model",
            {"body": StreamingBody(io.BytesIO(body), len(body)), "contentType": "application/json"},
            {"modelId": parameter_default("EmbeddingModelId"), "contentType": "application/json",
             "accept": "application/json", "body": json.dumps({"inputText": text, "dimensions": DIM,
                                                               "normalize": True})})

    def extraction(self, memories: list[dict[str, Any]]) -> None:
        """One Converse call answered the way a model answers under toolChoice: a toolUse block."""
        self.runtime.add_response("converse", {
            "output": {"message": {"role": "assistant", "content": [{"toolUse": {
                "toolUseId": f"tooluse_{uuid.uuid4().hex[:22]}", "name": "ExtractionResult",
                "input": {"memories": memories}}}]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 655, "outputTokens": 71, "totalTokens": 726},
            "metrics": {"latencyMs": 1184},
        })

    def consolidation(self, decisions: list[dict[str, Any]]) -> None:
        """The write-time consolidation call of a job whose statements have neighbours (one per batch)."""
        self.runtime.add_response("converse", {
            "output": {"message": {"role": "assistant", "content": [{"toolUse": {
                "toolUseId": f"tooluse_{uuid.uuid4().hex[:22]}", "name": "ConsolidationResult",
                "input": {"decisions": decisions}}}]}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 412, "outputTokens": 38, "totalTokens": 450},
            "metrics": {"latencyMs": 802},
        })


def unit(i: int) -> list[float]:
    """A unit vector along axis i: texts given the same one are identical to the index."""
    return [1.0 if j == i else 0.0 for j in range(DIM)]


class AnswersReferenceTexts:
    """bedrock-runtime as the functions get it: every call goes to the stubbed client, except the
    embeddings of the embedder guard's reference texts (services/embedder_guard.py), which each cold
    start makes once and which Bedrock answers the same way every time, and those of the messages
    the test added (each message is indexed on add, and again by its extraction job) unless the call
    is the one the test scripted next — so the tests stub only the calls they are about."""

    def __init__(self, client: Any):
        self._client = client
        self.said: set[str] = set()  # message contents the test sent to the ingest function
        self.stubber: Stubber | None = None

    def invoke_model(self, **params: Any) -> dict[str, Any]:
        from memlane.services.embedder_guard import REFERENCE_TEXTS

        text = json.loads(params["body"]).get("inputText")
        if text in REFERENCE_TEXTS:
            axis = 61 + REFERENCE_TEXTS.index(text)
        elif text in self.said and not self._scripted_next(params):
            axis = 60  # a message document's vector: memories are searched apart from messages
        else:
            return self._client.invoke_model(**params)
        body = json.dumps({"embedding": unit(axis), "inputTextTokenCount": 9}).encode()
        return {"body": StreamingBody(io.BytesIO(body), len(body)), "contentType": "application/json"}

    def _scripted_next(self, params: dict[str, Any]) -> bool:
        queue = self.stubber._queue if self.stubber is not None else ()  # noqa: SLF001 — the Stubber's script
        return bool(queue) and queue[0]["operation_name"] == "InvokeModel" and \
            queue[0]["expected_params"] in (None, params)  # None: scripted for any text

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture()
def bedrock(monkeypatch: pytest.MonkeyPatch, aws: Aws) -> Iterator[Bedrock]:
    runtime = boto3.client("bedrock-runtime", region_name=REGION)
    agent = boto3.client("bedrock-agent-runtime", region_name=REGION)
    stubbed = {"bedrock-runtime": AnswersReferenceTexts(runtime), "bedrock-agent-runtime": agent}
    make_client = boto3.client

    def client(service: str, *args: Any, **kwargs: Any) -> Any:
        return stubbed.get(service) or make_client(service, *args, **kwargs)

    # The composition root builds its Bedrock clients with boto3.client; hand it the stubbed ones.
    monkeypatch.setattr(boto3, "client", client)
    with Stubber(runtime) as runtime_stub, Stubber(agent) as agent_stub:
        stubbed["bedrock-runtime"].stubber = runtime_stub
        yield Bedrock(runtime=runtime_stub, agent=agent_stub, said=stubbed["bedrock-runtime"].said)
        runtime_stub.assert_no_pending_responses()
        agent_stub.assert_no_pending_responses()


# -- the store and the grant every flow starts from ----------------------------------------------


@pytest.fixture()
def ingest(aws: Aws, bedrock: Bedrock) -> Callable[[dict[str, Any]], dict[str, Any]]:
    handler = aws.load("ingest")

    def call(event: dict[str, Any]) -> dict[str, Any]:
        bedrock.said.update(said_in(event))
        return handler(event)

    return call


def said_in(event: dict[str, Any]) -> list[str]:
    """The message contents (or plain text) of an add event."""
    try:
        body = json.loads(event.get("body") or "{}")
    except ValueError:
        return []
    if not isinstance(body, dict):
        return []
    said = [m.get("content") for m in body.get("messages") or [] if isinstance(m, dict)]
    return [t for t in [*said, body.get("text")] if isinstance(t, str)]


@pytest.fixture()
def granted(aws: Aws, bedrock: Bedrock) -> None:
    """An admin grant for the events' caller role, written the way an operator does it."""
    from memlane import bootstrap
    from memlane.config import Settings
    from memlane.services import access

    access.grant(bootstrap.build(Settings.from_env()), CALLER_ROLE, {"*": ["*"]}, admin=True)


@pytest.fixture()
def store(granted: None, ingest: Callable[[dict[str, Any]], dict[str, Any]]) -> str:
    from tests.handlers.events import load_event

    response = ingest(load_event("ingest", "create_store"))
    assert response["statusCode"] == 201, response
    return json.loads(response["body"])["name"]
