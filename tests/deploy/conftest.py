"""The deploy rehearsal's fixtures: one rehearsed stack per session (tests/deploy/deployment.py).

Run on its own, after the real engines are up (`make rehearse`): it imports `memlane` from the layer it
builds, so nothing may import the source tree's first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.deploy.deployment import Rehearsal
from tests.deploy.stack import REGION


@pytest.fixture(scope="session")
def rehearsal() -> Iterator[Rehearsal]:
    engine = os.environ.get("MEMLANE_OPENSEARCH_URL")
    assert engine, "the rehearsal needs the real OpenSearch: scripts/engines.sh start, then source its engines.env"
    from moto import mock_aws

    saved = dict(os.environ)
    # The rehearsal's own (operator's) credentials; a function never sees them.
    os.environ.update({"AWS_ACCESS_KEY_ID": "operator", "AWS_SECRET_ACCESS_KEY": "operator",
                       "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION})
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        os.environ.pop(name, None)
    # Not pytest's tmp_path: concurrent pytest runs on one machine prune each other's base directories.
    workdir = Path(tempfile.mkdtemp(prefix="memlane-rehearsal-"))
    with mock_aws():
        r = Rehearsal(workdir, engine)
        with r.hooked():
            r.provision()
            r.build()
            yield r
        r.standin.stop()
    os.environ.clear()
    os.environ.update(saved)
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def flow() -> dict[str, Any]:
    """What one step of the flow leaves for the next (ids, the queue's messages)."""
    return {}

