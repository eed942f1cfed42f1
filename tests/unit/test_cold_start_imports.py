"""What a Lambda's cold start imports (issue 17, item 5; docs/benchmarks.md §9): each function imports the
route families it serves and the machinery of the events it handles, nothing else. numpy (0.3-0.5 s here)
only where a dream runs its rules engine; the dream and consolidation engines nowhere an API function that
runs neither; the Powertools parser models only in the extract function, whose SQS records they validate.

Each function's app.py is imported in a fresh interpreter, as Lambda does, with the deployed environment
(AWS mode, DynamoDB, SQS, OpenSearch, Bedrock; clients are only constructed, no call is made)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LAMBDA_ENV = {
    "PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_TRACE_DISABLED": "true",
    "MEMLANE_MODE": "aws", "MEMLANE_AUTH": "iam", "MEMLANE_TABLE": "dynamodb", "MEMLANE_TABLE_NAME": "memlane-test",
    "MEMLANE_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/memlane-test",
    "MEMLANE_INDEX": "opensearch", "MEMLANE_OPENSEARCH_URL": "https://search-memlane-test.us-east-1.es.amazonaws.com",
    "MEMLANE_EMBEDDER": "bedrock", "MEMLANE_LLM": "bedrock", "MEMLANE_RERANKER": "bedrock",
    "MEMLANE_TENANT_ROLE_ARN": "arn:aws:iam::123456789012:role/memlane-tenant-data",
    "MEMLANE_DATA_DIR": "/tmp/memlane-cold-start-test", "MEMLANE_SCHEMA_POLICY": "off",
}

# Imported by no API function but Dream: what only a dream runs, and the extract function's record models.
DREAM = {"memlane.dream.engine", "memlane.dream.llm", "memlane.services.dream", "memlane.prompts.dream"}
NOT_ON_AN_API_PATH = DREAM | {"numpy", "aws_lambda_powertools.utilities.parser"}
# ... and what only extraction runs (consolidation against the nearest memories): a sync add, on Ingest.
EXTRACTION = {"memlane.services.consolidate", "memlane.services.consolidate_llm"}
ROUTES = {f"memlane.api.routes.{family}" for family in
          ("stores", "ingest", "search", "tasks", "dream", "threads", "profiles", "context", "summaries")}


def imported_by(function: str) -> set[str]:
    probe = (f"import sys, json; sys.path[:0] = [{str(ROOT / 'functions' / function)!r}, {str(ROOT / 'shared')!r}]; "
             "import app; print(json.dumps(sorted(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], env=LAMBDA_ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.splitlines()[-1]))


def prefixed(modules: set[str], names: set[str]) -> list[str]:
    """The names some module of `modules` is, or is inside of."""
    return sorted(name for name in names if any(m == name or m.startswith(name + ".") for m in modules))


@pytest.mark.parametrize(("function", "families", "forbidden"), [
    ("search", {"search", "context", "summaries"}, NOT_ON_AN_API_PATH | EXTRACTION),
    ("tasks", {"tasks"}, NOT_ON_AN_API_PATH | EXTRACTION),  # the sweeper's job machinery: on its first sweep
    ("ingest", {"ingest", "stores", "threads", "profiles"}, NOT_ON_AN_API_PATH),
])
def test_an_api_function_imports_its_routes_and_no_dream_or_job_machinery(
        function: str, families: set[str], forbidden: set[str]) -> None:
    modules = imported_by(function)
    assert prefixed(modules, forbidden) == []
    assert prefixed(modules, ROUTES) == sorted(f"memlane.api.routes.{family}" for family in families)


def test_the_dream_function_imports_no_numpy_until_a_dream_runs_its_rules() -> None:
    modules = imported_by("dream")
    assert prefixed(modules, {"numpy", "memlane.dream.rules", "aws_lambda_powertools.utilities.parser"}) == []
    assert prefixed(modules, ROUTES) == ["memlane.api.routes.dream"]


def test_the_extract_function_imports_no_routes_and_no_numpy() -> None:
    modules = imported_by("extract")
    assert prefixed(modules, ROUTES | {"numpy", "memlane.api.app"}) == []
    assert "aws_lambda_powertools.utilities.parser.models" in modules  # its records are validated with them


@pytest.mark.parametrize("function", ["search", "ingest", "tasks"])
def test_the_models_an_api_function_builds_at_init_have_no_string_annotations(function: str) -> None:
    """pydantic turns each string annotation (`from __future__ import annotations`) into a ForwardRef, which
    compiles it, for every field of every model built at import: ≈ 600 compiles on an API function's path,
    ≈ 0.04 s of its init (docs/benchmarks.md §9). The modules that define those models keep real annotations."""
    probe = (f"import sys, json; sys.path[:0] = [{str(ROOT / 'functions' / function)!r}, {str(ROOT / 'shared')!r}]; "
             "import app, pydantic\n"
             "found = sorted({m.__name__ for m in list(sys.modules.values()) if (m.__name__ or '').startswith('memlane.')"
             " for c in vars(m).values() if isinstance(c, type) and issubclass(c, pydantic.BaseModel)"
             " and c.__module__ == m.__name__ and any(isinstance(a, str) for a in vars(c).get('__annotations__', {}).values())})\n"
             "print(json.dumps(found))")
    done = subprocess.run([sys.executable, "-c", probe], env=LAMBDA_ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
