"""The 2 MB body limit at the API, whatever the way in (domain/limits.MAX_BODY_BYTES): 413 one byte past it, raw or
base64, audited, nothing written; a body marked base64 that is not is a 400, not a 500 (regression trials)."""
import base64
import json

import pytest

from memlane.api.app import build_api
from memlane.domain.limits import MAX_BODY_BYTES
from memlane.server import http_event
from memlane.services import stores


@pytest.fixture()
def api(deps):
    stores.create(deps, name="demo")
    return build_api(deps)


def event(body: str, encoded=False, path="/v1/stores/demo/memories"):
    e = http_event("POST", path, {"Content-Type": "application/json"}, b"", "127.0.0.1")
    e["body"], e["isBase64Encoded"] = body, encoded
    return e


def padded_add(total_bytes: int, char: str = "a") -> str:
    """An add body of exactly `total_bytes` UTF-8 bytes (char: 1-, 2-, 3- or 4-byte)."""
    head = json.dumps({"scope": {"app_id": "app", "tenant_id": "u1", "agent_id": "a", "run_id": "r1"},
                       "request_id": "big-1", "messages": [{"role": "user", "content": ""}]}, ensure_ascii=False)
    cut = head.index('"content": ""') + len('"content": "')
    room = total_bytes - len(head.encode())
    width = len(char.encode())
    fill = char * (room // width) + "a" * (room % width)
    body = head[:cut] + fill + head[cut:]
    assert len(body.encode()) == total_bytes
    return body


def status(api, e):
    r = api.resolve(e, None)
    return r["statusCode"], json.loads(r["body"] or "{}").get("error", {}).get("code")


@pytest.mark.parametrize("char", ["a", "é", "中", "😀"])
@pytest.mark.parametrize("encoded", [False, True])
def test_exactly_at_and_one_past_the_limit(api, char, encoded):
    for size, refused in ((MAX_BODY_BYTES, False), (MAX_BODY_BYTES + 1, True)):
        body = padded_add(size, char)
        sent = base64.b64encode(body.encode()).decode() if encoded else body
        code, err = status(api, event(sent, encoded))
        assert (code == 413) == refused, (size, char, encoded, code, err)


def test_the_413_is_audited_and_nothing_written(api, deps):
    body = padded_add(MAX_BODY_BYTES + 10)
    assert status(api, event(body)) == (413, "payload_too_large")
    tenant = deps.table.query("demo#app#u1", limit=100).items
    assert tenant == []
    logged = deps.table.query("demo#~audit", limit=100).items + deps.table.query("~all#~audit", limit=100).items
    assert any(int(i["status"]) == 413 for i in logged), logged


@pytest.mark.parametrize("body", ["", None])
def test_an_empty_body(api, body):
    code, err = status(api, event(body))
    assert code == 400, (code, err)


def test_invalid_base64_is_a_client_error_not_500(api):
    """isBase64Encoded with a body that is not base64 (bad padding): `_refuse_oversized` steps aside
    (returns None) and the route's own decoding raises binascii.Error → 500 internal_error, audited as a bug."""
    code, err = status(api, event("e30", encoded=True))  # '{}' in base64 without its padding
    assert code == 400, (code, err)


def test_invalid_base64_over_the_limit_is_413(api):
    """A 3 MB body that is not valid base64: no 413 (the check gives up on binascii.Error)."""
    code, err = status(api, event("A" * 3_000_001, encoded=True))
    assert code == 413, (code, err)
