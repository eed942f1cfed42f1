"""The API Gateway HTTP API (v2) event of one request, for tests that call the API in process."""

from __future__ import annotations

import json


def api_event(method: str, path: str, body: dict | None = None, key: str | None = None, query: str = "") -> dict:
    headers = {"content-type": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    params = dict(p.split("=", 1) for p in query.split("&")) if query else None
    return {"version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": query,
            "headers": headers, "queryStringParameters": params,
            "requestContext": {"requestId": "r", "http": {"method": method, "path": path, "sourceIp": "127.0.0.1"},
                               "stage": "$default"},
            "body": json.dumps(body) if body is not None else None, "isBase64Encoded": False}
