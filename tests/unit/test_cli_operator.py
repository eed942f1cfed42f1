"""The operator's CLI against a deployed table: `memlane grants put` with MEMLANE_MODE=aws writes the
grant to DynamoDB (moto here), builds nothing else and creates nothing in the current directory; without
the AWS extra it says which extra to install."""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import Any, Iterator

import boto3
import pytest

from memlane import cli
from memlane.adapters.dynamodb.table import create_table

REGION = "eu-west-1"
ROLE = "arn:aws:iam::123456789012:role/travel-backend"


@pytest.fixture()
def deployed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    from moto import mock_aws

    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "MEMLANE_DATA_DIR", "MEMLANE_OPENSEARCH_URL",
                 "MEMLANE_INDEX", "MEMLANE_TABLE", "MEMLANE_EMBEDDER"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                        "MEMLANE_MODE": "aws", "MEMLANE_TABLE_NAME": "memlane-prod"}.items():
        monkeypatch.setenv(name, value)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        create_table(client, "memlane-prod")
        yield client


def test_grants_put_writes_the_deployed_table_and_nothing_local(deployed: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--json", "grants", "put", "--principal", ROLE, "--app", "travel-app", "--tenant", "alice"]) == 0
    items = deployed.scan(TableName="memlane-prod")["Items"]
    assert [i["pk"]["S"] for i in items] == ["~grants"]
    assert ROLE in items[0]["sk"]["S"] or ROLE in str(items[0])
    assert os.listdir(".") == []  # no .memlane, no index, no queue file in the operator's directory
    assert '"principal": "arn:aws:iam::123456789012:role/travel-backend"' in capsys.readouterr().out


def test_grants_put_without_the_aws_extra_names_it(deployed: Any, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    real_import = builtins.__import__

    def no_boto3(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "boto3" or name.startswith("boto3.") or name == "botocore" or name.startswith("botocore."):
            raise ModuleNotFoundError(f"No module named '{name}'", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_boto3)
    code = cli.main(["grants", "put", "--principal", ROLE, "--app", "travel-app"])
    err = capsys.readouterr().err
    assert code == 5
    assert "pip install 'memlane[aws]'" in err
    assert os.listdir(".") == []


def test_keys_create_locally_still_writes_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("MEMLANE_MODE", "MEMLANE_TABLE", "MEMLANE_INDEX", "MEMLANE_OPENSEARCH_URL", "MEMLANE_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    assert cli.main(["--data-dir", str(data), "keys", "create", "--principal", "ops", "--admin"]) == 0
    assert "ml_" in capsys.readouterr().out
    assert sorted(p.name for p in data.iterdir() if not p.name.startswith("table.db-")) == ["table.db"]


def test_an_admin_key_cannot_be_shown_as_limited_to_some_tenants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A deletion trial: `keys create --admin --app app1 --tenant alice` printed a grant limited to alice, and the key
    erased another tenant (an admin reaches every tenant). The combination is refused, on the CLI and below it."""
    from memlane.bootstrap import build_operator
    from memlane.config import Settings
    from memlane.domain.errors import InvalidInput
    from memlane.services import access

    for name in ("MEMLANE_MODE", "MEMLANE_TABLE", "MEMLANE_INDEX", "MEMLANE_OPENSEARCH_URL", "MEMLANE_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    code = cli.main(["--data-dir", str(data), "keys", "create", "--principal", "ops", "--admin", "--app", "app1",
                     "--tenant", "alice"])
    assert code == 64 and "--admin reaches every app and tenant" in capsys.readouterr().err
    assert not data.exists()  # refused before anything was written
    tenant_alone = ["--data-dir", str(data), "keys", "create", "--principal", "ops", "--admin", "--tenant", "bob"]
    assert cli.main(tenant_alone) == 64
    assert "--tenant needs --app" in capsys.readouterr().err and not data.exists()
    deps = build_operator(Settings.from_env(data_dir=data))
    with pytest.raises(InvalidInput):
        access.grant(deps, "ops", {"app1": ["alice"]}, admin=True)
    assert access.grant(deps, "ops", {"*": ["*"]}, admin=True).admin


def test_a_command_that_calls_no_server_refuses_a_url_instead_of_ignoring_it(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A working-memory trial: `memlane fsck STORE --url URL` ignored --url, made an empty ./.memlane and answered
    store_not_found for a store the server had."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEMLANE_URL", raising=False)
    for argv in (["fsck", "demo", "--url", "http://127.0.0.1:9"], ["--url", "http://127.0.0.1:9", "reindex", "demo"],
                 ["fsck", "demo", "--url=http://127.0.0.1:8420"]):  # the default URL, given: refused all the same
        assert cli.main(argv) == 64
        assert "leave --url out" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no ./.memlane made


def test_a_command_that_reads_a_data_dir_refuses_one_that_is_not_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's trial: `memlane fsck demo` without --data-dir made an empty ./.memlane and answered
    store_not_found, as if the store had been lost."""
    monkeypatch.chdir(tmp_path)
    for name in ("MEMLANE_DATA_DIR", "MEMLANE_MODE", "MEMLANE_OPENSEARCH_URL", "MEMLANE_TABLE_NAME"):
        monkeypatch.delenv(name, raising=False)
    for argv in (["fsck", "demo"], ["reindex", "demo"], ["readings", "demo"], ["keys", "list"],
                 ["keys", "revoke", "--principal", "ops"], ["--data-dir", "gone", "fsck", "demo"]):
        assert cli.main(argv) == 64, argv
        assert "no data dir at" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing made


def test_serve_with_an_opensearch_url_without_the_aws_extra_names_it(tmp_path: Path) -> None:
    """Issue 17 #4: `memlane serve` with MEMLANE_OPENSEARCH_URL set and opensearch-py not installed ended in a
    ModuleNotFoundError traceback; it must say which extra to install and exit 5."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['opensearchpy'] = None\n"  # as if the aws extra were not installed
            "from memlane import cli\n"
            f"sys.exit(cli.main(['--data-dir', {str(tmp_path / 'data')!r}, 'serve', '--port', '0']))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env.update(MEMLANE_OPENSEARCH_URL="http://127.0.0.1:9", MEMLANE_EMBEDDER="hashing")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=tmp_path)
    assert done.returncode == cli.EXIT_MISSING_EXTRA, done.stderr
    assert "pip install 'memlane[aws]'" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("session", ["arn:aws:sts::123456789012:assumed-role/support-agent/tenant-alice",
                                     "AROAQX7EXAMPLEPRODUCER:tenant-alice"])
def test_a_grant_to_one_session_of_a_role_is_refused(tmp_path: Path, session: str) -> None:
    """A review: a grant to `assumed-role/R/tenant-alice` was taken by anyone allowed to assume R, who names the
    session as they like. The role itself may be granted."""
    from memlane.bootstrap import build_operator
    from memlane.config import Settings
    from memlane.domain.errors import InvalidInput
    from memlane.services import access

    deps = build_operator(Settings.from_env(env={}, data_dir=tmp_path / "data"))
    with pytest.raises(InvalidInput, match="grant the role") as refused:
        access.grant(deps, session, {"support": ["alice"]})
    assert refused.value.field == "principal" and deps.repo.get_grant(session) is None
    assert access.grant(deps, "arn:aws:iam::123456789012:role/support-agent", {"support": ["alice"]})

