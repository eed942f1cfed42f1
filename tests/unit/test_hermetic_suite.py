"""The default suite does not depend on what the developer's shell exported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ENGINE_VARIABLES

ROOT = Path(__file__).resolve().parents[2]


def test_engine_variables_exported_for_the_integration_suite_do_not_reach_the_default_suite() -> None:
    """With engines.env sourced (as the integration suite wants) and no engine behind it, a handler test
    built its DynamoDB client on MEMLANE_DYNAMODB_ENDPOINT instead of moto, and a server a session fixture
    started inherited them: 60 errors."""
    unreachable = {"MEMLANE_OPENSEARCH_URL": "http://admin:x@127.0.0.1:9", "MEMLANE_OPENSEARCH_TENANT_KEY": "k",
                   "MEMLANE_DYNAMODB_ENDPOINT": "http://127.0.0.1:9", "MEMLANE_OPENSEARCH_KNN_ENGINE": "lucene"}
    assert set(unreachable) == set(ENGINE_VARIABLES)
    env = {**os.environ, **unreachable, "PYTHONPATH": str(ROOT / "shared")}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-W", "ignore",
                          "tests/handlers/test_tasks.py", "tests/integrations/test_docs_snippets.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]  # 5 if nothing ran, 1 on an error
