"""The IAM documents of template.yaml, as one deployed stack would hold them, for the offline evaluator.

template.yaml is read with the loader the handler tests use (tests/handlers/template.py) and its
CloudFormation intrinsics are resolved for one stack: `!GetAtt X.Arn` becomes the ARN the resource
would have, `!Sub` and `!Ref` fill the pseudo parameters and the parameters' defaults, `!If` takes the branch of the chosen conditions and
`!Ref AWS::NoValue` drops its element. What it does not know, it refuses (`UnresolvedTemplate`), so a
new construct in the template cannot be judged by a guess.

A function's identity policy is everything the template gives its role that can touch DynamoDB or
STS: its inline `Statement` documents and every `AWS::IAM::ManagedPolicy` / `AWS::IAM::Policy` that
lists the role under `Roles` (or that the function names under `Policies`). SAM policy templates
other than the SQS one are refused: `DynamoDBCrudPolicy` and its kind grant the whole table.
"""

from __future__ import annotations

import re
from typing import Any

from tests.handlers.template import load_template

ACCOUNT = "123456789012"
REGION = "us-east-1"
PARTITION = "aws"
STACK = "memlane"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{STACK}-Table-ABC123"
TENANT_ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/{STACK}-TenantDataRole-1"
# Every function of the template (a new one is judged like the others, and must join the trust to reach
# tenant data); what CloudFormation names the role SAM makes for function F: <stack>-<F>Role-<suffix>.
FUNCTIONS = tuple(name for name, r in load_template()["Resources"].items() if r["Type"] == "AWS::Serverless::Function")
FUNCTION_ROLES = {f"{name}Role": f"arn:aws:iam::{ACCOUNT}:role/{STACK}-{name}Role-1A2B3C" for name in FUNCTIONS}
ARNS = {"Table": TABLE_ARN, "TenantDataRole": TENANT_ROLE_ARN,
        "ExtractQueue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-ExtractQueue-ABC123",  # its depth: QueueDepth
        "IngestQueue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-IngestQueue-ABC123",  # Ingest consumes it only
        "IngestDeadLetterQueue": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{STACK}-IngestDeadLetterQueue-ABC123",
        **FUNCTION_ROLES}
PSEUDO = {"AWS::Partition": PARTITION, "AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::StackName": STACK,
          "AWS::URLSuffix": "amazonaws.com"}
# The default parameters: a created OpenSearch domain, the Bedrock reranker on.
DEFAULT_CONDITIONS = {"CreateSearchDomain": True, "UseExistingDomain": False, "HasReranker": True}
SQS_TEMPLATES = {"SQSSendMessagePolicy"}  # SAM policy templates allowed on a function: no DynamoDB in them

_SUB = re.compile(r"\$\{([^}!]+)\}")
_NO_VALUE = object()


class UnresolvedTemplate(ValueError):
    """The template uses something this resolver does not know how to resolve."""


def resolve(node: Any, conditions: dict[str, bool] | None = None) -> Any:
    """`node` with its intrinsics resolved for the test stack."""
    conditions = DEFAULT_CONDITIONS if conditions is None else conditions
    value = _resolve(node, conditions)
    if value is _NO_VALUE:
        raise UnresolvedTemplate("the whole node is AWS::NoValue")
    return value


def _resolve(node: Any, conditions: dict[str, bool]) -> Any:
    if isinstance(node, list):
        return [v for v in (_resolve(n, conditions) for n in node) if v is not _NO_VALUE]
    if not isinstance(node, dict):
        return node
    if len(node) == 1:
        [(key, arg)] = node.items()
        if key == "Ref":
            if arg == "AWS::NoValue":
                return _NO_VALUE
            if arg in PSEUDO:
                return PSEUDO[arg]
            if arg in _parameters():
                return _parameters()[arg]
            raise UnresolvedTemplate(f"!Ref {arg}")
        if key == "Fn::GetAtt":
            name, attribute = arg
            if attribute != "Arn" or name not in ARNS:
                raise UnresolvedTemplate(f"!GetAtt {name}.{attribute}")
            return ARNS[name]
        if key == "Fn::Sub":
            if not isinstance(arg, str):
                raise UnresolvedTemplate("!Sub with a variable map")
            return _sub(arg)
        if key == "Fn::If":
            name, yes, no = arg
            if name not in conditions:
                raise UnresolvedTemplate(f"condition {name}")
            return _resolve(yes if conditions[name] else no, conditions)
        if key.startswith("Fn::"):
            raise UnresolvedTemplate(key)
    out = {}
    for key, value in node.items():
        resolved = _resolve(value, conditions)
        if resolved is not _NO_VALUE:
            out[key] = resolved
    return out


def _sub(text: str) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in PSEUDO:
            return PSEUDO[name]
        if name in _parameters():
            return _parameters()[name]
        if name.endswith(".Arn") and name[:-4] in ARNS:
            return ARNS[name[:-4]]
        raise UnresolvedTemplate(f"${{{name}}} in !Sub")

    return _SUB.sub(fill, text).replace("${!", "${")


def _parameters() -> dict[str, str]:
    """The template's parameters at their defaults."""
    return {k: str(v["Default"]) for k, v in load_template().get("Parameters", {}).items() if "Default" in v}


# -- the documents --------------------------------------------------------------------------------


def resources() -> dict[str, Any]:
    return load_template()["Resources"]


def trust_policy(conditions: dict[str, bool] | None = None) -> dict[str, Any]:
    """The tenant data role's trust policy."""
    return resolve(resources()["TenantDataRole"]["Properties"]["AssumeRolePolicyDocument"], conditions)


def tenant_data_policy(conditions: dict[str, bool] | None = None) -> dict[str, Any]:
    """The tenant data role's own (inline) policy: one document of all its statements."""
    statements: list[Any] = []
    for p in resources()["TenantDataRole"]["Properties"].get("Policies", []):
        statements += _statements(resolve(p["PolicyDocument"], conditions))
    return {"Version": "2012-10-17", "Statement": statements}


def function_role_policy(function: str, conditions: dict[str, bool] | None = None) -> dict[str, Any]:
    """Every statement the template gives `function`'s role (inline, named, and attached by `Roles`)."""
    role = f"{function}Role"
    props = resources()[function]["Properties"]
    if "Role" in props:
        raise UnresolvedTemplate(f"{function} names its own Role; read that role instead")
    statements: list[Any] = []
    for entry in props.get("Policies", []):
        statements += _function_policy(function, entry, conditions)
    for name, res in resources().items():
        if res["Type"] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy") and \
                {"Ref": role} in res["Properties"].get("Roles", []):
            statements += _statements(resolve(res["Properties"]["PolicyDocument"], conditions))
    if not statements:
        raise UnresolvedTemplate(f"{function}: no policy statement found")
    return {"Version": "2012-10-17", "Statement": statements}


def attached_roles(logical_id: str) -> list[str]:
    """The roles an AWS::IAM::ManagedPolicy / Policy of the template is attached to (logical ids)."""
    return [r["Ref"] for r in resources()[logical_id]["Properties"].get("Roles", [])]


def _function_policy(function: str, entry: Any, conditions: dict[str, bool] | None) -> list[Any]:
    if isinstance(entry, dict) and "Statement" in entry:  # an inline document
        return _statements(resolve(entry, conditions))
    if isinstance(entry, dict) and set(entry) == {"Ref"}:  # a managed policy of the template
        managed = resources()[entry["Ref"]]
        if managed["Type"] != "AWS::IAM::ManagedPolicy":
            raise UnresolvedTemplate(f"{function}: !Ref {entry['Ref']} is not a managed policy of the template")
        return _statements(resolve(managed["Properties"]["PolicyDocument"], conditions))
    if isinstance(entry, dict) and len(entry) == 1 and next(iter(entry)) in SQS_TEMPLATES:
        return []  # SQS only: nothing the evaluator is asked about here
    raise UnresolvedTemplate(f"{function}: policy {entry!r} (an AWS managed policy or a SAM policy template "
                             "that may grant DynamoDB) cannot be judged here")


def _statements(document: dict[str, Any]) -> list[Any]:
    statements = document["Statement"]
    return list(statements) if isinstance(statements, list) else [statements]
