"""template.yaml as data, read with a loader that keeps CloudFormation's short tags (!Ref, !GetAtt, ...)
as their long forms, so tests can build resources from the template itself and cannot drift from it."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(tag: str) -> Any:
    name = "Ref" if tag == "Ref" else f"Fn::{tag}"

    def construct(loader: yaml.SafeLoader, node: yaml.Node) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
            if tag == "GetAtt":  # !GetAtt Resource.Attribute
                value = value.split(".", 1)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        return {name: value}

    return construct


for _name in ("Ref", "GetAtt", "Sub", "If", "Not", "Equals", "And", "Or", "Condition", "Join", "Select",
              "Split", "FindInMap", "ImportValue", "GetAZs", "Base64", "Cidr", "Contains"):
    _CfnLoader.add_constructor(f"!{_name}", _tag(_name))


@cache
def load_template() -> dict[str, Any]:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)  # noqa: S506 — a SafeLoader subclass


def resource(logical_id: str) -> dict[str, Any]:
    return load_template()["Resources"][logical_id]


def create_table(client: Any, logical_id: str, name: str) -> None:
    """Create the AWS::DynamoDB::Table `logical_id` of the template under `name` (moto in the tests)."""
    props = resource(logical_id)["Properties"]
    client.create_table(TableName=name, KeySchema=props["KeySchema"],
                        AttributeDefinitions=props["AttributeDefinitions"], BillingMode=props["BillingMode"])
    ttl = props.get("TimeToLiveSpecification")
    if ttl:
        client.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
