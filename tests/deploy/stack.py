"""One stack of template.yaml as a deployer gets it: transformed by the SAM translator (the library `sam deploy`
runs in CloudFormation), then resolved for one account, Region and set of physical names.

Nothing is read from the source template except what CloudFormation never sees: the build recipes
(`Metadata.BuildMethod`/`ContextPath`, which `sam build` reads) and the local code paths. Functions, their
environments and their roles' policies all come from the transformed template, so a function, a permission or
a variable the others add is rehearsed without touching this file.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
ACCOUNT = "123456789012"  # the sample events' account (and moto's)
REGION = "us-west-2"  # the sample events' Region (Bedrock Rerank is offered there)
PARTITION = "aws"
STACK = "memlane"
SUFFIX = "R3HEARSAL"
DOMAIN = f"{STACK}-search"  # the created OpenSearch domain's name
LOCAL = "rehearsal-local-code"  # the S3 bucket placeholder `sam package` would fill: the key is the local path
PSEUDO = {"AWS::AccountId": ACCOUNT, "AWS::Region": REGION, "AWS::Partition": PARTITION,
          "AWS::StackName": STACK, "AWS::URLSuffix": "amazonaws.com", "AWS::StackId":
          f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{STACK}/00000000-0000-0000-0000-000000000000"}
_SUB = re.compile(r"\$\{([^}!][^}]*)\}")
_NO_VALUE = object()


class Unresolved(ValueError):
    """The template uses an intrinsic or attribute the rehearsal does not know: say so, never guess."""


def transform(search_endpoint: str) -> "Stack":
    """template.yaml through the SAM translator, with every parameter at its default."""
    from samtranslator.translator.managed_policy_translator import ManagedPolicyLoader
    from samtranslator.translator.transform import transform as sam_transform
    from samtranslator.yaml_helper import yaml_parse

    source = yaml_parse(TEMPLATE.read_text())
    template = copy.deepcopy(source)
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):  # what `sam package` does: local paths become S3 objects
            if isinstance(props.get(key), str):
                props[key] = f"s3://{LOCAL}/{props[key]}"

    class NoManagedPolicyNames(ManagedPolicyLoader):  # the template names AWS managed policies by ARN only
        def __init__(self) -> None:
            pass

        def load(self) -> dict[str, str]:
            return {}

    transformed = sam_transform(template, dict(PSEUDO), NoManagedPolicyNames())
    return Stack(source=source, template=transformed, search_endpoint=search_endpoint)


@dataclass
class Function:
    logical_id: str
    name: str
    role: str  # the role's logical id
    role_arn: str
    handler: str
    code_dir: Path  # the source (CodeUri)
    build_context: Path  # the Makefile `sam build` runs for it
    layers: list[str]  # logical ids of the layers, in order
    environment: dict[str, str]
    timeout: int
    events: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Stack:
    source: dict[str, Any]  # the SAM template as written
    template: dict[str, Any]  # the CloudFormation template the translator made of it
    search_endpoint: str  # host:port the created OpenSearch domain's endpoint resolves to

    # -- resources ----------------------------------------------------------------------------
    @property
    def resources(self) -> dict[str, Any]:
        return self.template["Resources"]

    def of_type(self, kind: str) -> dict[str, Any]:
        return {k: r for k, r in self.resources.items() if r["Type"] == kind and self.exists(k)}

    def exists(self, logical_id: str) -> bool:
        condition = self.resources[logical_id].get("Condition")
        return condition is None or self.condition(condition)

    def physical_name(self, logical_id: str) -> str:
        return f"{STACK}-{logical_id}-{SUFFIX}"

    @cached_property
    def functions(self) -> dict[str, Function]:
        out = {}
        for logical_id, res in self.of_type("AWS::Lambda::Function").items():
            props = self.resolve(res["Properties"])
            role_ref = res["Properties"]["Role"]
            if not (isinstance(role_ref, dict) and "Fn::GetAtt" in role_ref):
                raise Unresolved(f"{logical_id}: its Role is not a role of the template")
            source = self.source["Resources"][logical_id]
            metadata = source.get("Metadata", {})
            if metadata.get("BuildMethod") != "makefile":
                raise Unresolved(f"{logical_id}: only BuildMethod: makefile is rehearsed")
            code = ROOT / props["Code"]["S3Key"]
            out[logical_id] = Function(
                logical_id=logical_id, name=self.resolve({"Ref": logical_id}), role=role_ref["Fn::GetAtt"][0],
                role_arn=props["Role"], handler=props["Handler"], code_dir=code,
                build_context=ROOT / metadata.get("ContextPath", source["Properties"]["CodeUri"]),
                layers=[layer["Ref"] for layer in res["Properties"].get("Layers", [])],
                environment={k: str(v) for k, v in props.get("Environment", {}).get("Variables", {}).items()},
                timeout=int(props.get("Timeout", 3)),
                events={k: r for k, r in self.resources.items() if _targets(r, logical_id)},
            )
        return out

    @cached_property
    def routes(self) -> dict[str, str]:
        """"METHOD /path" -> the function its API Gateway integration invokes (from each HTTP API's OpenAPI body)."""
        out = {}
        for api in self.of_type("AWS::ApiGatewayV2::Api").values():
            for path, methods in api["Properties"].get("Body", {}).get("paths", {}).items():
                for method, spec in methods.items():
                    uri = spec["x-amazon-apigateway-integration"]["uri"]["Fn::Sub"]
                    out[f"{method.upper()} {path}"] = re.search(r"\$\{(\w+)\.Arn\}", uri).group(1)
        return out

    def layer_source(self, logical_id: str) -> tuple[Path, Path]:
        """(content dir, build context) of a layer, from the source template `sam build` reads."""
        name = self.resources[logical_id]["Properties"]["LayerName"]
        source = self.source["Resources"][name]
        content = ROOT / source["Properties"]["ContentUri"]
        return content, ROOT / source.get("Metadata", {}).get("ContextPath", source["Properties"]["ContentUri"])

    # -- IAM ----------------------------------------------------------------------------------
    def role_policies(self, role: str) -> list[dict[str, Any]]:
        """Every policy document the role holds: inline, managed of the template attached either way, and
        the AWS managed ones (by ARN: the caller looks their documents up)."""
        props = self.resources[role]["Properties"]
        documents = [{"name": f"{role}/{p['PolicyName']}", "document": self.resolve(p["PolicyDocument"])}
                     for p in props.get("Policies", [])]
        for arn in self.resolve(props.get("ManagedPolicyArns", [])):
            documents.append({"name": arn, "aws_managed": True})
        for name, res in {**self.of_type("AWS::IAM::ManagedPolicy"), **self.of_type("AWS::IAM::Policy")}.items():
            if {"Ref": role} in res["Properties"].get("Roles", []):
                documents.append({"name": name, "document": self.resolve(res["Properties"]["PolicyDocument"])})
        return documents

    def role_arn(self, role: str) -> str:
        return f"arn:{PARTITION}:iam::{ACCOUNT}:role/{self.physical_name(role)}"

    # -- intrinsics ---------------------------------------------------------------------------
    def condition(self, name: str) -> bool:
        return bool(self._value(self.template.get("Conditions", {})[name]))

    def parameter(self, name: str) -> Any:
        spec = self.template.get("Parameters", {})[name]
        if "Default" not in spec:
            raise Unresolved(f"parameter {name} has no default")
        return spec["Default"] if spec.get("Type") != "Number" else str(spec["Default"])

    def resolve(self, node: Any) -> Any:
        value = self._value(node)
        if value is _NO_VALUE:
            raise Unresolved("the whole node is AWS::NoValue")
        return value

    def _value(self, node: Any) -> Any:
        if isinstance(node, list):
            return [v for v in (self._value(n) for n in node) if v is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            [(key, arg)] = node.items()
            if key == "Ref":
                return self._ref(arg)
            if key == "Condition":
                return self.condition(arg)
            if key.startswith("Fn::"):
                return self._function(key[4:], arg)
        out = {}
        for key, value in node.items():
            resolved = self._value(value)
            if resolved is not _NO_VALUE:
                out[key] = resolved
        return out

    def _function(self, name: str, arg: Any) -> Any:
        if name == "If":
            condition, yes, no = arg
            return self._value(yes if self.condition(condition) else no)
        if name == "Equals":
            left, right = (self._value(a) for a in arg)
            return left == right
        if name == "Not":
            return not self._value(arg[0])
        if name == "And":
            return all(self._value(a) for a in arg)
        if name == "Or":
            return any(self._value(a) for a in arg)
        if name == "GetAtt":
            logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
            return self._attribute(logical_id, attribute)
        if name == "Sub":
            text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self._value(arg[1]))
            return _SUB.sub(lambda m: str(self._sub_variable(m.group(1), variables)), text).replace("${!", "${")
        if name == "Join":
            separator, items = arg
            return separator.join(str(v) for v in self._value(items))
        if name == "Select":
            index, items = arg
            return self._value(items)[int(self._value(index))]
        if name == "Split":
            separator, text = arg
            return self._value(text).split(separator)
        raise Unresolved(f"Fn::{name}")

    def _sub_variable(self, name: str, variables: dict[str, Any]) -> Any:
        if name in variables:
            return variables[name]
        if "." in name:
            logical_id, attribute = name.split(".", 1)
            return self._attribute(logical_id, attribute)
        return self._ref(name)

    def _ref(self, name: str) -> Any:
        if name == "AWS::NoValue":
            return _NO_VALUE
        if name in PSEUDO:
            return PSEUDO[name]
        if name in self.template.get("Parameters", {}):
            return self.parameter(name)
        if name not in self.resources:
            raise Unresolved(f"Ref {name}")
        kind, physical = self.resources[name]["Type"], self.physical_name(name)
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{physical}"
        if kind in ("AWS::SNS::Topic", "AWS::IAM::ManagedPolicy", "AWS::Lambda::LayerVersion"):
            return self._arn(name)
        return physical

    def _attribute(self, logical_id: str, attribute: str) -> Any:
        if logical_id not in self.resources:
            raise Unresolved(f"GetAtt {logical_id}.{attribute}")
        kind, physical = self.resources[logical_id]["Type"], self.physical_name(logical_id)
        if attribute == "Arn" or (kind == "AWS::SNS::Topic" and attribute == "TopicArn"):
            return self._arn(logical_id)
        if kind == "AWS::SQS::Queue" and attribute == "QueueName":
            return physical
        if kind == "AWS::SQS::Queue" and attribute == "QueueUrl":
            return self._ref(logical_id)
        if kind == "AWS::OpenSearchService::Domain" and attribute == "DomainEndpoint":
            return self.search_endpoint
        if kind == "AWS::OpenSearchService::Domain" and attribute == "DomainArn":
            return self._arn(logical_id)
        if kind == "AWS::IAM::Role" and attribute == "RoleId":
            return f"AROA{SUFFIX}{logical_id.upper()}"
        raise Unresolved(f"GetAtt {logical_id}.{attribute} ({kind})")

    def _arn(self, logical_id: str) -> str:
        kind, physical = self.resources[logical_id]["Type"], self.physical_name(logical_id)
        here = f"{REGION}:{ACCOUNT}"
        arns = {
            "AWS::SQS::Queue": f"arn:{PARTITION}:sqs:{here}:{physical}",
            "AWS::SNS::Topic": f"arn:{PARTITION}:sns:{here}:{physical}",
            "AWS::DynamoDB::Table": f"arn:{PARTITION}:dynamodb:{here}:table/{physical}",
            "AWS::IAM::Role": f"arn:{PARTITION}:iam::{ACCOUNT}:role/{physical}",
            "AWS::IAM::ManagedPolicy": f"arn:{PARTITION}:iam::{ACCOUNT}:policy/{physical}",
            "AWS::Lambda::Function": f"arn:{PARTITION}:lambda:{here}:function:{physical}",
            "AWS::Lambda::LayerVersion": f"arn:{PARTITION}:lambda:{here}:layer:{physical}:1",
            "AWS::Logs::LogGroup": f"arn:{PARTITION}:logs:{here}:log-group:{physical}:*",
            "AWS::OpenSearchService::Domain": f"arn:{PARTITION}:es:{here}:domain/{DOMAIN}",
            "AWS::Events::Rule": f"arn:{PARTITION}:events:{here}:rule/{physical}",
        }
        if kind not in arns:
            raise Unresolved(f"the ARN of {logical_id} ({kind})")
        return arns[kind]


def _targets(resource: dict[str, Any], function: str) -> bool:
    """An event source of `function`: an EventBridge rule targeting it, or an event source mapping."""
    props = resource.get("Properties", {})
    if resource["Type"] == "AWS::Events::Rule":
        return any(t.get("Arn") == {"Fn::GetAtt": [function, "Arn"]} for t in props.get("Targets", []))
    if resource["Type"] == "AWS::Lambda::EventSourceMapping":
        return props.get("FunctionName") == {"Ref": function}
    return False
