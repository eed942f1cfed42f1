"""The rehearsed deployment: the built functions as Lambda runs them, in one stack under moto, every AWS call
judged by its caller's IAM policies.

- Code: each function and layer is built with the recipe `sam build` runs for it (BuildMethod: makefile:
  `make build-<LogicalId> ARTIFACTS_DIR=...` with the template's ContextPath), into a temporary directory.
  A function's module is imported from its built directory and `memlane` from the built memlane layer (the
  check below makes sure it is not the source tree's). The third-party deps layer is the exception: its wheels
  are arm64/Python 3.13, so this Python's own packages stand in for it (scripts/check-template.sh imports the
  built functions with the pinned layer under Python 3.13).
- Each function is a container: its own environment (exactly the template's variables plus those Lambda
  sets: Region, function name, the role's credentials), its own boto3 default session and, like a Lambda
  cold start, its module imported once under that environment. Credentials are STS sessions of the
  function's role, so every call, to AWS or to OpenSearch, says who made it.
- AWS: DynamoDB, SQS, STS are moto (`mock_aws`), the resources made from the transformed template.
  Bedrock is answered at botocore's `before-send` hook (tests/deploy/bedrock_fake.py). OpenSearch is the
  HTTPS stand-in checking SigV4 in front of the real engine (tests/deploy/opensearch_standin.py).
- IAM: botocore's `before-call` hook of every client made while the rehearsal runs hands each call to the
  judge (tests/deploy/iam_eval.py) with the caller its credentials belong to; a denied call fails as AWS
  fails it (AccessDenied), and is remembered.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

import boto3
import botocore.session
from botocore.exceptions import ClientError

from tests.deploy import bedrock_fake
from tests.deploy.iam_eval import AWS_MANAGED, Call, Caller, Ledger, Policy
from tests.deploy.opensearch_standin import StandIn
from tests.deploy.stack import ACCOUNT, DOMAIN, REGION, Function, Stack, transform

# What the runner's environment may lend a function: nothing of memlane's or AWS's own settings.
_HOST_VARIABLES = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")


class Rehearsal:
    def __init__(self, workdir: Path, engine_url: str):
        self.workdir = workdir
        self.standin = StandIn(engine_url=engine_url, region=REGION, secrets=self._secret,
                               authorize=self._authorize_es, directory=workdir / "tls")
        self.standin.start()
        self.stack: Stack = transform(self.standin.endpoint)
        self.keys: dict[str, tuple[Caller, str, str | None]] = {}  # access key -> caller, secret, token
        self.unknown_keys: list[str] = []
        self.containers: dict[str, Container] = {}
        self._running = threading.local()
        tables = self.stack.of_type("AWS::DynamoDB::Table")
        self.ledger = Ledger(self._resource_policies(), hash_keys={
            self.stack.physical_name(t): next(k["AttributeName"] for k in r["Properties"]["KeySchema"]
                                              if k["KeyType"] == "HASH") for t, r in tables.items()})

    # -- the stack's resources under moto -------------------------------------------------------
    def provision(self) -> None:
        """The table(s) and queues of the transformed template, made in moto as CloudFormation would."""
        ddb = boto3.client("dynamodb", region_name=REGION)
        for logical_id, res in self.stack.of_type("AWS::DynamoDB::Table").items():
            props = self.stack.resolve(res["Properties"])
            ddb.create_table(TableName=self.stack.physical_name(logical_id), KeySchema=props["KeySchema"],
                             AttributeDefinitions=props["AttributeDefinitions"],
                             BillingMode=props.get("BillingMode", "PAY_PER_REQUEST"))
            if "TimeToLiveSpecification" in props:
                ddb.update_time_to_live(TableName=self.stack.physical_name(logical_id),
                                        TimeToLiveSpecification=props["TimeToLiveSpecification"])
        sqs = boto3.client("sqs", region_name=REGION)
        queues = self.stack.of_type("AWS::SQS::Queue")
        # Dead-letter queues first: a redrive policy names its target's ARN.
        for logical_id, res in sorted(queues.items(), key=lambda q: "RedrivePolicy" in q[1].get("Properties", {})):
            props = self.stack.resolve(res.get("Properties", {}))
            attributes = {k: json.dumps(v) if isinstance(v, dict) else str(v) for k, v in props.items()
                          if k in ("VisibilityTimeout", "MessageRetentionPeriod", "RedrivePolicy", "DelaySeconds")}
            sqs.create_queue(QueueName=self.stack.physical_name(logical_id), Attributes=attributes)

    def _resource_policies(self) -> dict[str, list[Policy]]:
        out: dict[str, list[Policy]] = {}
        for logical_id, res in self.stack.of_type("AWS::IAM::Role").items():
            trust = self.stack.resolve(res["Properties"]["AssumeRolePolicyDocument"])
            if any("AWS" in (s.get("Principal") or {}) for s in trust["Statement"]):  # roles functions assume
                out[self.stack.role_arn(logical_id)] = [Policy(f"{logical_id}/trust", trust)]
        for logical_id, res in self.stack.of_type("AWS::OpenSearchService::Domain").items():
            policy = self.stack.resolve(res["Properties"].get("AccessPolicies") or {"Statement": []})
            out[f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{DOMAIN}/"] = [Policy(f"{logical_id}/AccessPolicies", policy)]
        return out

    def policies_of(self, role: str) -> tuple[Policy, ...]:
        out = []
        for entry in self.stack.role_policies(role):
            if entry.get("aws_managed"):
                if entry["name"] not in AWS_MANAGED:
                    raise AssertionError(f"{role}: the rehearsal does not hold the AWS managed policy {entry['name']}")
                out.append(Policy(entry["name"], {"Version": "2012-10-17", "Statement": AWS_MANAGED[entry["name"]]},
                                  ours=False))
            else:
                out.append(Policy(entry["name"], entry["document"]))
        return tuple(out)

    # -- functions --------------------------------------------------------------------------------
    def build(self) -> Path:
        """Every function and layer, with the recipes `sam build` runs (BuildMethod: makefile)."""
        out = self.workdir / "build"
        layers = {layer for f in self.stack.functions.values() for layer in f.layers}
        for logical_id, function in self.stack.functions.items():
            _make(function.build_context, function.code_dir, f"build-{logical_id}", out / logical_id)
        self.layer_paths = []
        for layer in sorted(layers):
            content, context = self.stack.layer_source(layer)
            name = self.stack.resources[layer]["Properties"]["LayerName"]
            if (content / "requirements.txt").exists():
                continue  # third-party wheels for arm64/3.13: this Python's packages stand in (see above)
            _make(context, content, f"build-{name}", out / name)
            self.layer_paths.append(out / name / "python")
        if "memlane" in sys.modules:
            raise AssertionError("memlane was imported before the rehearsal built it: run tests/deploy on its own "
                                 "(make rehearse)")
        sys.path[:0] = [str(p) for p in self.layer_paths]
        import memlane

        if not Path(memlane.__file__).is_relative_to(out):
            raise AssertionError(f"memlane comes from {memlane.__file__}, not from the built layer")
        self.build_dir = out
        return out

    def container(self, logical_id: str) -> "Container":
        if logical_id not in self.containers:
            function = self.stack.functions[logical_id]
            role_arn = self.stack.role_arn(function.role)
            creds = boto3.client("sts", region_name=REGION).assume_role(
                RoleArn=role_arn, RoleSessionName=function.name)["Credentials"]
            caller = Caller(logical_id, role_arn, self.policies_of(function.role))
            self.keys[creds["AccessKeyId"]] = (caller, creds["SecretAccessKey"], creds["SessionToken"])
            env = {k: os.environ[k] for k in _HOST_VARIABLES if k in os.environ}
            env.update({
                "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION, "AWS_LAMBDA_FUNCTION_NAME": function.name,
                "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
                "AWS_EXECUTION_ENV": "AWS_Lambda_python3.13", "_HANDLER": function.handler,
                "AWS_ACCESS_KEY_ID": creds["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
                "AWS_SESSION_TOKEN": creds["SessionToken"],
                # The stand-in's certificate, trusted as the domain's public one is through certifi.
                "SSL_CERT_FILE": str(self.standin.ca_file),
            })
            env.update(function.environment)
            container = Container(self, function, env)
            self.containers[logical_id] = container
            container.start()
        return self.containers[logical_id]

    # -- hooks ------------------------------------------------------------------------------------
    @contextmanager
    def hooked(self) -> Iterator[None]:
        """Hook every botocore client created from now on (moto's own hooks stay in place)."""
        original = botocore.session.Session.create_client
        rehearsal = self

        def create_client(session: Any, *args: Any, **kwargs: Any) -> Any:
            client = original(session, *args, **kwargs)
            rehearsal._hook(client)
            return client

        botocore.session.Session.create_client = create_client  # type: ignore[method-assign]
        try:
            yield
        finally:
            botocore.session.Session.create_client = original  # type: ignore[method-assign]

    def _hook(self, client: Any) -> None:
        events = client.meta.events
        service = client.meta.service_model

        def before_parameter_build(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            context["rehearsal_params"] = params  # the call's parameters as given (before-call sees them serialized)

        def before_call(model: Any, context: dict[str, Any], **_: Any) -> None:
            params = context["rehearsal_params"]
            credentials = client._request_signer._credentials  # noqa: SLF001 — who signs this client's calls
            key = credentials.access_key if credentials is not None else None
            entry = self.keys.get(key) if key else None
            if entry is None:
                if getattr(self._running, "function", None):
                    self.unknown_keys.append(f"{self._running.function}: {service.service_name}:{model.name} "
                                             f"signed by unknown key {key}")
                return  # the rehearsal's own set-up calls (an operator's)
            call = Call(service.signing_name, model.name, params, client.meta.region_name, ACCOUNT)
            verdicts = self.ledger.decide(entry[0], call)
            denied = [v for v in verdicts if v.decision.value != "Allow"]
            if denied:
                raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": str(denied[0])}}, model.name)

        def after_assume_role(parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
            credentials = client._request_signer._credentials  # noqa: SLF001
            entry = self.keys.get(credentials.access_key) if credentials is not None else None
            if entry is None or "Credentials" not in parsed:
                return
            params = context["rehearsal_params"]
            role = next(r for r in self.stack.of_type("AWS::IAM::Role")
                        if self.stack.role_arn(r) == params["RoleArn"])
            tags = {t["Key"]: t["Value"] for t in params.get("Tags", [])}
            caller = Caller(entry[0].function, params["RoleArn"], self.policies_of(role), tags)
            c = parsed["Credentials"]
            self.keys[c["AccessKeyId"]] = (caller, c["SecretAccessKey"], c["SessionToken"])

        def bedrock(request: Any, event_name: str, **_: Any) -> Any:
            return bedrock_fake.respond(request, event_name.rsplit(".", 1)[-1])

        events.register("before-parameter-build", before_parameter_build)
        events.register("before-call", before_call)
        events.register("after-call.sts.AssumeRole", after_assume_role)
        if service.service_name in ("bedrock-runtime", "bedrock-agent-runtime"):
            # botocore calls every before-send handler: moto's must not answer Bedrock too.
            for handler in list(events._emitter._handlers.prefix_search(f"before-send.{service.service_id.hyphenize()}")):  # noqa: SLF001
                if type(handler).__name__ == "BotocoreStubber":
                    events.unregister("before-send", handler)
            events.register_first(f"before-send.{service.service_id.hyphenize()}", bedrock)

    def _secret(self, key: str) -> tuple[str, str | None] | None:
        entry = self.keys.get(key)
        return (entry[1], entry[2]) if entry else None

    def _authorize_es(self, key: str, method: str, path: str) -> bool:
        caller = self.keys[key][0]
        verdicts = self.ledger.decide(caller, Call("es", method, {"domain": DOMAIN, "path": path}, REGION, ACCOUNT))
        return all(v.decision.value == "Allow" for v in verdicts)

    @contextmanager
    def running(self, function: str) -> Iterator[None]:
        self._running.function = function
        try:
            yield
        finally:
            self._running.function = None


@dataclass
class FakeContext:
    """The LambdaContext attributes the handlers and Powertools read."""

    function_name: str
    timeout_s: int
    memory_limit_in_mb: int = 1024
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return self.timeout_s * 1000


class Container:
    """One function's execution environment: its environment, its boto3 default session, its module."""

    def __init__(self, rehearsal: Rehearsal, function: Function, env: dict[str, str]):
        self.rehearsal, self.function, self.env = rehearsal, function, env
        self.module: ModuleType | None = None
        self.session: boto3.Session | None = None

    @contextmanager
    def _inside(self) -> Iterator[None]:
        saved_env, saved_session = dict(os.environ), boto3.DEFAULT_SESSION
        os.environ.clear()
        os.environ.update(self.env)
        if self.session is None:
            self.session = boto3.Session()
        boto3.DEFAULT_SESSION = self.session
        try:
            with self.rehearsal.running(self.function.logical_id):
                yield
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
            boto3.DEFAULT_SESSION = saved_session

    def start(self) -> None:
        """The cold start: the handler's module imported from the build, under the function's environment."""
        module_name, attribute = self.function.handler.rsplit(".", 1)
        path = self.rehearsal.build_dir / self.function.logical_id / f"{module_name.replace('.', '/')}.py"
        # A unique module name: the five functions' `app` modules share this one process.
        spec = importlib.util.spec_from_file_location(f"rehearsed_{self.function.logical_id}_{module_name}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        with self._inside():
            spec.loader.exec_module(module)
        self.module = module
        self.handler: Callable[[dict[str, Any], Any], dict[str, Any]] = getattr(module, attribute)

    def invoke(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._inside():
            return self.handler(json.loads(json.dumps(event)), FakeContext(self.function.name, self.function.timeout))


def _make(context: Path, source: Path, target: str, artifacts: Path) -> None:
    """What `sam build` does for BuildMethod: makefile (aws-lambda-builders' custom_make workflow): copy the
    source to a scratch directory, following symlinks, then run the target there."""
    scratch = artifacts.parent / f".scratch-{artifacts.name}"
    shutil.copytree(source, scratch, symlinks=False, ignore=shutil.ignore_patterns(".aws-sam", ".git", "__pycache__"))
    artifacts.mkdir(parents=True, exist_ok=True)
    subprocess.run(["make", "-s", "-f", str(context / "Makefile"), "-C", str(scratch), target,
                    f"ARTIFACTS_DIR={artifacts}"], check=True, capture_output=True, text=True)
