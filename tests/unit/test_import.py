"""`memlane import FILE.jsonl --store S`: one add per line, sent in batches (POST .../memories:batch); each line's
request_id makes a second run a replay, so an interrupted import is resumed by running it again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from memlane.api.app import build_api
from memlane.importer import import_file
from memlane.repository import tenant_pk
from memlane.server import _LambdaContext, http_event
from memlane.services import stores

SCOPE = {"app_id": "crm", "tenant_id": "acme", "agent_id": "sync", "run_id": "export-1"}
PETS = ["beagle", "parrot", "tabby cat", "hamster", "goldfish", "iguana", "poodle", "ferret"]


def line(i: int, **changes: Any) -> str:
    add = {"request_id": f"crm-{i:05d}", "scope": SCOPE,
           "messages": [{"role": "user", "name": "Ann", "content": f"Customer {i} adopted a {PETS[i % len(PETS)]} "
                                                                   f"named Pet{i}."}], **changes}
    return json.dumps(add)


@pytest.fixture()
def service(tmp_path: Path) -> Iterator[Any]:
    from memlane.bootstrap import build_local
    from memlane.config import Settings

    svc = build_local(Settings.from_env(env={}, data_dir=tmp_path / "data", embedder="hashing", reranker="none"))
    stores.create(svc.deps, name="demo")
    yield svc
    svc.close()


def in_process(service: Any):
    """The transport `memlane --local` uses: the server's resolver without a socket, jobs run before it answers."""
    api = build_api(service.deps)

    def send(method: str, path: str, body: Any) -> tuple[int, Any]:
        result = api.resolve(http_event(method, path, {"content-type": "application/json"},
                                        json.dumps(body).encode(), "127.0.0.1"), _LambdaContext())
        service.drain()
        return result["statusCode"], json.loads(result["body"])

    return send


def counts(service: Any) -> tuple[int, int]:
    pk = tenant_pk("demo", "crm", "acme")
    table = service.deps.table
    return (len(table.query(pk, prefix="TASK#", limit=10_000).items),
            len(table.query(pk, prefix="MEM#", limit=10_000).items))


def test_a_thousand_lines_imported_twice_add_nothing_the_second_time(service: Any, tmp_path: Path) -> None:
    export = tmp_path / "export.jsonl"
    export.write_text("".join(line(i) + "\n" for i in range(1000)))
    send = in_process(service)

    first = import_file(send, "demo", export)
    tasks, memories = counts(service)
    again = import_file(send, "demo", export)

    assert (first.lines, first.accepted, first.replayed, first.refused, first.failed) == (1000, 1000, 0, 0, 0)
    assert (again.lines, again.accepted, again.replayed, again.refused, again.failed) == (1000, 0, 1000, 0, 0)
    assert tasks == 1000 and memories >= 1000
    assert counts(service) == (tasks, memories)


def test_a_bad_line_is_refused_with_its_line_number_and_the_others_go_in(service: Any, tmp_path: Path) -> None:
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join([line(1), "{not json", json.dumps({"scope": SCOPE, "text": "no request id"}), "",
                                 line(2, messages=[{"role": "user", "content": ""}]), line(3),
                                 line(4)[:-1] + ', "request_id": "again"}',  # a key twice
                                 line(5)[:-1] + ', "metadata": {"n": NaN}}', "[" * 100_000 + "]" * 100_000]) + "\n")

    report = import_file(in_process(service), "demo", export)

    assert (report.lines, report.accepted, report.refused) == (8, 2, 6)
    assert [(r.line, r.code) for r in report.refusals] == [
        (2, "invalid_json"), (3, "request_id_required"), (5, "invalid_input"), (7, "duplicate_key"),
        (8, "invalid_json"), (9, "invalid_json")]  # NaN; nested past the parser (a traceback, the batch lost)
    assert counts(service)[0] == 2


def test_a_byte_order_mark_is_no_part_of_the_first_line_and_a_json_error_points_into_its_line(
        service: Any, tmp_path: Path) -> None:
    """A trial (session 30): a file saved with a UTF-8 byte order mark had its first line refused as not JSON, and a
    JSON error said "line 2 column 1" of a line the report numbered 3."""
    export = tmp_path / "export.jsonl"
    export.write_bytes(("\ufeff" + line(1) + "\n" + line(2) + "\n" + '{"request_id": "x", "scope": \n').encode())
    report = import_file(in_process(service), "demo", export)
    assert (report.lines, report.accepted, report.refused) == (3, 2, 1)
    (refused,) = report.refusals
    # where in its line a value was expected: its end
    assert refused.line == 3 and refused.code == "invalid_json" and "at character 31" in refused.message
    assert "line 2" not in refused.message
