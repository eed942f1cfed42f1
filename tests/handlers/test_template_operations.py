"""template.yaml as an operator needs it: Rules that refuse a model or Rerank a Region does not offer,
alarms with actions on everything that can fail silently, a failure destination for the scheduled
dream, reserved concurrency per function, and the OpenSearch production profile by parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.handlers.template import load_template, resource

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = ["Ingest", "Search", "Tasks", "Extract", "Dream"]
ALARM_ACTIONS = [{"Fn::If": ["CreateAlarmTopic", {"Ref": "AlarmTopic"}, {"Ref": "AlarmTopicArn"}]}]


# -- Rules, evaluated as CloudFormation does before it creates anything --------------------------


def evaluate(node: Any, values: dict[str, str]) -> Any:
    """The value of a rule expression under parameter `values`. Only what CloudFormation accepts in Rules
    (Ref and the rule functions: no Fn::Split, Fn::Select, Fn::If ...) is evaluated; anything else fails."""
    if isinstance(node, list):
        return [evaluate(item, values) for item in node]
    if not isinstance(node, dict):
        return node
    [(name, arg)] = node.items()
    if name == "Ref":
        return values[arg]
    args = evaluate(arg, values)
    match name:
        case "Fn::Equals":
            return args[0] == args[1]
        case "Fn::Not":
            return not args[0]
        case "Fn::And":
            return all(args)
        case "Fn::Or":
            return any(args)
        case "Fn::Contains":
            return args[1] in args[0]
        case "Fn::EachMemberEquals":
            return all(member == args[1] for member in args[0])
        case "Fn::EachMemberIn":
            return all(member in args[1] for member in args[0])
    raise AssertionError(f"{name} is not allowed in CloudFormation Rules")


def refused(region: str, **overrides: str) -> list[str]:
    """The rules a deploy with these parameters into `region` breaks (CloudFormation refuses it)."""
    template = load_template()
    values = {name: str(p.get("Default", "")) for name, p in template["Parameters"].items()}
    values |= {"AWS::Region": region, **overrides}
    return [name for name, rule in template["Rules"].items()
            if evaluate(rule.get("RuleCondition", True), values)
            and not all(evaluate(a["Assert"], values) for a in rule["Assertions"])]


def test_the_defaults_deploy_in_the_region_samconfig_names() -> None:
    assert refused("us-west-2") == []


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "ap-southeast-2"])
def test_amazon_rerank_is_refused_where_bedrock_does_not_offer_it(region: str) -> None:
    assert refused(region) == ["RerankOfferedInTheRegion"]
    assert refused(region, RerankModelId="") == []  # the heuristic reranker runs anywhere


def test_cohere_rerank_is_also_offered_in_us_east_1_and_refused_elsewhere() -> None:
    assert refused("us-east-1", RerankModelId="cohere.rerank-v3-5:0") == []
    assert refused("eu-west-1", RerankModelId="cohere.rerank-v3-5:0") == ["CohereRerankOfferedInTheRegion"]


def test_a_geographic_profile_is_refused_outside_its_geography_and_global_runs_anywhere() -> None:
    us, eu = "us.anthropic.claude-haiku-4-5-20251001-v1:0", "eu.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert refused("eu-central-1", LlmModelId=us) == ["UsProfileFromAUsRegion"]
    assert refused("us-west-2", LlmModelId=eu) == ["EuProfileFromAnEuRegion"]
    assert refused("eu-central-1", LlmModelId=eu) == []
    assert refused("eu-central-1") == []  # global. (the default) from any commercial Region


def test_fine_grained_access_control_is_for_the_created_domain_only() -> None:
    existing = {"OpenSearchEndpoint": "https://search-x-abc.us-west-2.es.amazonaws.com", "OpenSearchDomainName": "x"}
    admin = "arn:aws:iam::123456789012:role/opensearch-admin"
    assert refused("us-west-2", OpenSearchMasterUserArn=admin) == []
    assert refused("us-west-2", OpenSearchMasterUserArn=admin, **existing) == ["FineGrainedAccessNeedsTheCreatedDomain"]


# -- alarms and where they go --------------------------------------------------------------------


def alarms() -> dict[str, dict]:
    return {k: v for k, v in load_template()["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"}


def alarm_on(namespace: str, metric: str, dimension: dict) -> dict:
    [found] = [a["Properties"] for a in alarms().values() if a["Properties"]["Namespace"] == namespace
               and a["Properties"]["MetricName"] == metric and dimension in a["Properties"]["Dimensions"]]
    return found


def test_every_alarm_notifies_the_alarm_topic_on_alarm_and_on_recovery() -> None:
    assert len(alarms()) >= 2 * len(FUNCTIONS) + 5
    for name, alarm in alarms().items():
        assert alarm["Properties"]["AlarmActions"] == ALARM_ACTIONS, name
        assert alarm["Properties"]["OKActions"] == ALARM_ACTIONS, name
    assert resource("AlarmTopic")["Condition"] == "CreateAlarmTopic"  # AlarmTopicArn="" creates one


@pytest.mark.parametrize("function", FUNCTIONS)
def test_every_function_alarms_on_errors_and_throttles(function: str) -> None:
    for metric in ("Errors", "Throttles"):
        alarm = alarm_on("AWS/Lambda", metric, {"Name": "FunctionName", "Value": {"Ref": function}})
        assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")


def test_api_5xx_dead_letters_failed_tasks_and_extraction_lag_alarm() -> None:
    alarm_on("AWS/ApiGateway", "5xx", {"Name": "ApiId", "Value": {"Ref": "Api"}})
    alarm_on("AWS/SQS", "ApproximateNumberOfMessagesVisible",
             {"Name": "QueueName", "Value": {"Fn::GetAtt": ["ExtractDeadLetterQueue", "QueueName"]}})
    lag = alarm_on("AWS/SQS", "ApproximateAgeOfOldestMessage",
                   {"Name": "QueueName", "Value": {"Fn::GetAtt": ["ExtractQueue", "QueueName"]}})
    assert lag["Threshold"] == {"Ref": "ExtractLagAlarmSeconds"}
    # The EMF metrics the code emits (aws_lambda.py), in its namespace and with its service dimension.
    for metric, service, emitter in (("TasksFailed", "extract", "aws_lambda.py"),
                                     ("RerankFallback", "search", "bootstrap.py")):
        alarm_on("memlane", metric, {"Name": "service", "Value": service})
        assert f'"{metric}"' in (ROOT / "shared" / "memlane" / emitter).read_text()
    assert load_template()["Globals"]["Function"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] == "memlane"


def test_a_failed_scheduled_dream_run_is_kept_and_alarmed() -> None:
    dream = resource("Dream")["Properties"]
    run = dream["Events"]["Run"]["Properties"]
    queue = {"Fn::GetAtt": ["ScheduleFailureQueue", "Arn"]}
    assert run["DeadLetterConfig"] == {"Arn": queue}  # EventBridge could not deliver it
    assert run["RetryPolicy"]["MaximumRetryAttempts"] >= 1
    assert dream["EventInvokeConfig"]["DestinationConfig"]["OnFailure"] == {"Type": "SQS", "Destination": queue}
    [statement] = resource("ScheduleFailureQueuePolicy")["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Condition"] == {"ArnEquals": {"aws:SourceArn": {"Fn::GetAtt": ["DreamRun", "Arn"]}}}
    alarm_on("AWS/SQS", "ApproximateNumberOfMessagesVisible",
             {"Name": "QueueName", "Value": {"Fn::GetAtt": ["ScheduleFailureQueue", "QueueName"]}})


@pytest.mark.parametrize("function", FUNCTIONS)
def test_reserved_concurrency_is_a_parameter_and_0_leaves_the_function_unreserved(function: str) -> None:
    template = load_template()
    parameter = template["Parameters"][f"{function}ReservedConcurrency"]
    assert (parameter["Default"], parameter["MinValue"]) == (0, 0)
    assert template["Conditions"][f"Reserve{function}"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": f"{function}ReservedConcurrency"}, "0"]}]}
    assert resource(function)["Properties"]["ReservedConcurrentExecutions"] == {
        "Fn::If": [f"Reserve{function}", {"Ref": f"{function}ReservedConcurrency"}, {"Ref": "AWS::NoValue"}]}


# -- the OpenSearch profiles -----------------------------------------------------------------------


def test_the_dev_profile_is_the_default_and_the_production_profile_is_parameters() -> None:
    params = load_template()["Parameters"]
    assert (params["OpenSearchInstanceType"]["Default"], params["OpenSearchInstanceCount"]["Default"]) == \
        ("t3.medium.search", 1)
    assert (params["OpenSearchZoneCount"]["Default"], params["OpenSearchDedicatedMasterType"]["Default"],
            params["OpenSearchMasterUserArn"]["Default"], params["OpenSearchLogPublishing"]["Default"]) == \
        ("1", "", "", "false")
    domain = resource("SearchDomain")["Properties"]
    cluster = domain["ClusterConfig"]
    assert cluster["ZoneAwarenessEnabled"] == {"Fn::If": ["ZoneAware", True, False]}
    assert cluster["DedicatedMasterEnabled"] == {"Fn::If": ["DedicatedMasters", True, False]}
    security = domain["AdvancedSecurityOptions"]["Fn::If"]
    assert security[0] == "FineGrainedAccess"
    assert security[1] == {"Enabled": True, "InternalUserDatabaseEnabled": False,
                           "MasterUserOptions": {"MasterUserARN": {"Ref": "OpenSearchMasterUserArn"}}}
    logs = domain["LogPublishingOptions"]["Fn::If"]
    assert logs[0] == "PublishSearchLogs"
    assert set(logs[1]) == {"ES_APPLICATION_LOGS", "SEARCH_SLOW_LOGS", "INDEX_SLOW_LOGS"}
    assert resource("SearchDomain")["DependsOn"] == "SearchDomainLogsPolicy"


def test_the_ingestion_queue_alarms_on_dead_letters_and_lag() -> None:
    alarm_on("AWS/SQS", "ApproximateNumberOfMessagesVisible",
             {"Name": "QueueName", "Value": {"Fn::GetAtt": ["IngestDeadLetterQueue", "QueueName"]}})
    lag = alarm_on("AWS/SQS", "ApproximateAgeOfOldestMessage",
                   {"Name": "QueueName", "Value": {"Fn::GetAtt": ["IngestQueue", "QueueName"]}})
    assert lag["Threshold"] == {"Ref": "IngestLagAlarmSeconds"}
