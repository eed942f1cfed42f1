"""template.yaml against the code it deploys: key schema, routes, settings, queue timing, pins."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from memlane.adapters.dynamodb.table import ATTRIBUTE_DEFINITIONS, KEY_SCHEMA, TTL_ATTRIBUTE
from memlane.api.app import FAMILIES, build_app
from memlane.config import Settings
from tests.handlers.template import load_template, resource

ROOT = Path(__file__).resolve().parents[2]
OPERATIONAL_ROUTES = {("GET", "/health"), ("GET", "/openapi.json")}  # served by Tasks, outside the OpenAPI document


def functions() -> dict[str, dict]:
    return {k: v for k, v in load_template()["Resources"].items() if v["Type"] == "AWS::Serverless::Function"}


def api_functions() -> list[str]:
    return [name for name, f in functions().items()
            if any(e["Type"] == "HttpApi" for e in f["Properties"].get("Events", {}).values())]


def served_families(function: str) -> list[str]:
    """The families functions/<name>/app.py passes to build_http_handler."""
    tree = ast.parse((ROOT / "functions" / function.lower() / "app.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "build_http_handler"]
    assert len(calls) == 1, f"functions/{function.lower()}/app.py should call build_http_handler once"
    return list(ast.literal_eval(calls[0].args[0]))


def family_routes(families: list[str]) -> set[tuple[str, str]]:
    paths = build_app(None, families).get_openapi_schema().paths  # type: ignore[arg-type]  # no route runs
    return {(method.upper(), path) for path, item in paths.items()
            for method in item.model_dump(exclude_none=True) if method in ("get", "post", "put", "patch", "delete")}


def template_routes(function: str) -> set[tuple[str, str]]:
    return {(e["Properties"]["Method"].upper(), e["Properties"]["Path"])
            for e in functions()[function]["Properties"]["Events"].values() if e["Type"] == "HttpApi"}


def test_table_mirrors_the_adapter_key_schema_and_ttl() -> None:
    props = resource("Table")["Properties"]
    assert props["KeySchema"] == KEY_SCHEMA
    assert props["AttributeDefinitions"] == ATTRIBUTE_DEFINITIONS
    assert props["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert resource("Table")["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("function", ["Ingest", "Search", "Tasks", "Dream"])
def test_api_routes_are_exactly_the_families_the_function_serves(function: str) -> None:
    expected = family_routes(served_families(function))
    assert template_routes(function) - OPERATIONAL_ROUTES == {(m, p) for m, p in expected}


def test_operational_routes_are_served_by_the_tasks_function() -> None:
    assert template_routes("Tasks") & OPERATIONAL_ROUTES == OPERATIONAL_ROUTES


def test_every_route_family_is_served_by_exactly_one_function() -> None:
    served = [family for f in api_functions() for family in served_families(f)]
    assert sorted(served) == sorted(FAMILIES), "add a new family to one function's app.py and its routes here"


def test_api_requires_sigv4_on_every_route() -> None:
    auth = resource("Api")["Properties"]["Auth"]
    assert auth == {"EnableIamAuthorizer": True, "DefaultAuthorizer": "AWS_IAM"}
    for function in api_functions():
        for event in functions()[function]["Properties"]["Events"].values():
            assert "Auth" not in event["Properties"], "no route may opt out of IAM authorisation"


def test_extract_reports_batch_item_failures_and_the_queue_outlasts_it() -> None:
    extract = functions()["Extract"]["Properties"]
    [source] = extract["Events"].values()
    assert source["Type"] == "SQS"
    assert source["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert source["Properties"]["Queue"] == {"Fn::GetAtt": ["ExtractQueue", "Arn"]}
    queue = resource("ExtractQueue")["Properties"]
    # AWS guidance: the source queue's visibility timeout is at least six times the function timeout.
    assert queue["VisibilityTimeout"] >= 6 * extract["Timeout"]
    assert queue["RedrivePolicy"]["maxReceiveCount"] == {"Ref": "ExtractMaxReceives"}
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {"Fn::GetAtt": ["ExtractDeadLetterQueue", "Arn"]}
    # The handler gives a job up on the receive that is the queue's last.
    env = load_template()["Globals"]["Function"]["Environment"]["Variables"]
    assert env["MEMLANE_WORKER_MAX_ATTEMPTS"] == {"Ref": "ExtractMaxReceives"}
    dead = resource("ExtractDeadLetterQueue")["Properties"]
    assert dead["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]


def test_every_memlane_variable_is_a_setting() -> None:
    template = load_template()
    variables = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    for function in functions().values():
        variables |= function["Properties"].get("Environment", {}).get("Variables", {})
    fields = {f"MEMLANE_{name.upper()}" for name in Settings.model_fields}
    assert {k for k in variables if k.startswith("MEMLANE_")} - fields == set()
    assert variables["MEMLANE_MODE"] == "aws"


def test_functions_run_a_supported_python_from_their_own_folders() -> None:
    glob = load_template()["Globals"]["Function"]
    assert glob["Runtime"] == "python3.13"  # python3.11 (AL2) was deprecated by Lambda on 2026-06-30
    assert glob["Architectures"] == ["arm64"]
    for name, function in functions().items():
        props = function["Properties"]
        assert props["CodeUri"] == f"functions/{name.lower()}/" and props["Handler"] == "app.lambda_handler"
        assert function["Metadata"] == {"BuildMethod": "makefile", "ContextPath": "functions"}


def test_deps_layer_pins_every_package_within_pyproject_ranges() -> None:
    lines = [line.split("#")[0].strip() for file in sorted((ROOT / "layers/deps").glob("requirements*.txt"))
             for line in file.read_text().splitlines()]
    pins = {Requirement(line).name.lower().replace("_", "-"): Requirement(line) for line in lines if line}
    for req in pins.values():
        assert len(req.specifier) == 1 and next(iter(req.specifier)).operator == "==", f"{req} is not pinned"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for spec in project["dependencies"] + project["optional-dependencies"]["aws"]:
        wanted = Requirement(spec)
        name = wanted.name.lower().replace("_", "-")
        version = next(iter(pins[name].specifier)).version
        assert wanted.specifier.contains(version), f"{name}=={version} is outside pyproject's {wanted.specifier}"


def test_the_layers_count_tokens_offline() -> None:
    """Context cards count tokens on the search function: the deps layer carries `tokenizers` (without
    its download-only dependencies) and the memlane layer its tokenizer.json (package data)."""
    nodeps = (ROOT / "layers/deps/requirements-nodeps.txt").read_text()
    assert any(line.startswith("tokenizers==") for line in nodeps.splitlines())
    assert "--no-deps --upgrade --requirement requirements-nodeps.txt" in (ROOT / "layers/deps/Makefile").read_text()
    assert "tokenizers" in " ".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                                    ["optional-dependencies"]["aws"])
    data = ROOT / "shared/memlane/adapters/tokenizers/data/all-minilm-l6-v2.json"
    assert data.is_file() and "adapters/tokenizers/data/*.json" in (ROOT / "pyproject.toml").read_text()


# -- IAM: the template deploys exactly the documents of infra/iam (judged offline in tests/isolation) --------

IAM_DIR = ROOT / "infra" / "iam"


def iam_document(name: str, **placeholders: str) -> dict:
    from tests.isolation.iam_eval import load_policy

    return load_policy(IAM_DIR / name, **placeholders)


def test_tenant_data_role_policy_is_the_infra_document() -> None:
    from tests.isolation import template_policies as tpl

    # its DynamoDB statements, then its read-only index statement (docs/index-confinement.md)
    domain = f"arn:aws:es:{tpl.REGION}:{tpl.ACCOUNT}:domain/*"
    documents = [iam_document("tenant-data-policy.json", TableArn=tpl.TABLE_ARN),
                 iam_document("tenant-index-policy.json", DomainArn=domain)]
    assert tpl.tenant_data_policy() == {"Version": "2012-10-17",
                                        "Statement": [s for d in documents for s in d["Statement"]]}


def test_tenant_data_role_trusts_exactly_the_function_roles_of_the_infra_document() -> None:
    from tests.isolation import template_policies as tpl

    shipped = iam_document("tenant-data-trust.json", **{f"{role}Arn": arn for role, arn in tpl.FUNCTION_ROLES.items()})
    # The template's functions, all of them: a new function must be added to the trust and the document.
    assert tpl.trust_policy() == shipped


def test_every_function_role_keeps_only_the_global_partitions_of_the_infra_document() -> None:
    from tests.isolation import template_policies as tpl

    [global_only, *common] = iam_document("function-global-policy.json", TableArn=tpl.TABLE_ARN,
                                          TenantDataRoleArn=tpl.TENANT_ROLE_ARN)["Statement"]
    assert sorted(tpl.attached_roles("FunctionRolesPolicy")) == sorted(f"{name}Role" for name in functions())
    assert tpl.resolve(resource("FunctionRolesPolicy")["Properties"]["PolicyDocument"])["Statement"] == common
    for name in functions():
        on_table = [s for s in tpl.function_role_policy(name)["Statement"]
                    if s["Effect"] == "Allow" and s["Resource"] == tpl.TABLE_ARN
                    and s.get("Sid") != "SchemaCheck"]  # DescribeTable/DescribeTimeToLive: no item, no partition
        assert [s["Sid"] for s in on_table] == ["GlobalPartitionsOnly"], name
        [own] = on_table
        assert own["Condition"] == global_only["Condition"], name
        assert set(own["Action"]) <= set(global_only["Action"]), name


# -- the LLM: a current model, through a cross-Region inference profile ----------------------------
PROFILE_PREFIXES = ("global.", "us.", "eu.", "apac.", "jp.", "au.", "ca.")


def test_default_llm_is_claude_haiku_4_5_through_the_global_profile_in_template_and_config() -> None:
    default = load_template()["Parameters"]["LlmModelId"]["Default"]
    assert default == Settings.model_fields["bedrock_llm_model"].default  # one default, not two
    assert default == "global.anthropic.claude-haiku-4-5-20251001-v1:0"
    # samconfig.toml's overrides are what `sam deploy` actually uses: the same model, or none.
    overrides = tomllib.loads((ROOT / "samconfig.toml").read_text())["default"]["deploy"]["parameters"]
    deployed = dict(o.split("=", 1) for o in overrides.get("parameter_overrides", []))
    assert deployed.get("LlmModelId", default) == default


def _allows(statements: list[dict], arn: str, profile_arn: str) -> bool:
    """IAM's answer for bedrock:InvokeModel on `arn` in a call through `profile_arn` (Allow statements only)."""
    from fnmatch import fnmatchcase

    for s in statements:
        if s["Effect"] != "Allow":
            continue
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        condition = s.get("Condition", {}).get("StringEquals", {}).get("bedrock:InferenceProfileArn", profile_arn)
        if (s["Effect"] == "Allow" and any(fnmatchcase("bedrock:InvokeModel", a) for a in actions)
                and any(fnmatchcase(arn, r) for r in resources) and condition == profile_arn):
            return True
    return False


@pytest.mark.parametrize("function", ["Ingest", "Extract", "Dream"])  # the functions that extract or dream
def test_llm_roles_may_invoke_the_profile_and_the_model_in_every_region_it_routes_to(function: str) -> None:
    from tests.isolation import template_policies as tpl

    profile = load_template()["Parameters"]["LlmModelId"]["Default"]
    assert profile.startswith(PROFILE_PREFIXES)
    model = profile.split(".", 1)[1]
    statements = [s for p in resource(function)["Properties"]["Policies"] if isinstance(p, dict) and "Statement" in p
                  for s in tpl.resolve(p)["Statement"]]
    profile_arn = f"arn:aws:bedrock:{tpl.REGION}:{tpl.ACCOUNT}:inference-profile/{profile}"
    assert _allows(statements, profile_arn, profile_arn)
    # A geographic profile names the destination Region; the global one names none (arn:aws:bedrock:::...).
    for destination in ("us-east-2", "eu-west-1", "ap-northeast-1", ""):
        assert _allows(statements, f"arn:aws:bedrock:{destination}::foundation-model/{model}", profile_arn), destination
    # Only through the profile: a direct call to another model elsewhere is not allowed.
    assert not _allows(statements, "arn:aws:bedrock:eu-west-1::foundation-model/other.model-v1:0", "")


def test_ingest_consumes_the_ingestion_queue_with_batch_item_failures() -> None:
    ingest = functions()["Ingest"]["Properties"]
    [source] = [e for e in ingest["Events"].values() if e["Type"] == "SQS"]
    assert source["Properties"]["Queue"] == {"Fn::GetAtt": ["IngestQueue", "Arn"]}
    assert source["Properties"]["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    queue = resource("IngestQueue")["Properties"]
    timeout = ingest.get("Timeout", load_template()["Globals"]["Function"]["Timeout"])
    assert queue["VisibilityTimeout"] >= 6 * timeout  # AWS guidance for an SQS event source
    assert queue["RedrivePolicy"] == {"deadLetterTargetArn": {"Fn::GetAtt": ["IngestDeadLetterQueue", "Arn"]},
                                      "maxReceiveCount": {"Ref": "IngestMaxReceives"}}
    dead = resource("IngestDeadLetterQueue")["Properties"]
    assert dead["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]
    for props in (queue, dead):  # encrypted at rest as the other queues
        assert props["SqsManagedSseEnabled"] is True
    # who may send at all: the queue policy refuses anything but TLS
    statements = resource("IngestQueuePolicy")["Properties"]["PolicyDocument"]["Statement"]
    assert any(s.get("Effect") == "Deny" and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
               for s in statements if isinstance(s, dict))
