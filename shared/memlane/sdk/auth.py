"""How the SDK proves who it is: an API key (local deployments, `memlane keys create`) or SigV4 for the
API deployed on AWS (API Gateway IAM auth: service `execute-api`, credentials of the standard chain —
environment, profile, SSO, instance role — re-read per request since they may refresh)."""

from __future__ import annotations

import re
from typing import Generator
from urllib.parse import urlsplit

import httpx

SIGV4_SERVICE = "execute-api"
_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


def region_of(url: str) -> str | None:
    """The region in an API Gateway URL (https://{id}.execute-api.{region}.amazonaws.com), else None."""
    found = _API_HOST.match((urlsplit(url).hostname or "").lower())
    return found.group(1) if found else None


class SigV4Unavailable(RuntimeError):
    """SigV4 was asked for and cannot sign: botocore missing, or no credentials or region found."""


class SigV4Signer:
    """Signs requests with botocore's SigV4Auth."""

    def __init__(self, url: str, *, region: str | None = None, service: str = SIGV4_SERVICE):
        try:
            from botocore.session import Session
        except ModuleNotFoundError as missing:
            raise SigV4Unavailable("SigV4 signing needs botocore: pip install 'memlane[aws]'") from missing
        session = Session()
        self.region = region or region_of(url) or session.get_config_variable("region")
        if not self.region:
            raise SigV4Unavailable("SigV4 needs a region: an execute-api URL, region=..., --region or AWS_REGION")
        self.credentials = session.get_credentials()
        if self.credentials is None:
            raise SigV4Unavailable("SigV4 needs AWS credentials and the standard chain found none")
        self.service = service

    def headers(self, method: str, url: str, data: bytes | None, headers: dict[str, str]) -> dict[str, str]:
        """The headers to send: `headers` plus X-Amz-Date, the session token if any, and Authorization."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method=method, url=url, data=data or b"", headers=headers)
        SigV4Auth(self.credentials.get_frozen_credentials(), self.service, self.region).add_auth(request)
        return dict(request.headers.items())


class SigV4Auth(httpx.Auth):
    """Signs each attempt (a retry gets a fresh X-Amz-Date) over the exact bytes, path and query sent."""

    requires_request_body = True

    def __init__(self, signer: SigV4Signer):
        self.signer = signer

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        signed = self.signer.headers(request.method, str(request.url), request.content,
                                     {"Content-Type": request.headers.get("Content-Type", "application/json")})
        request.headers.update(signed)
        yield request


class ApiKeyAuth(httpx.Auth):
    def __init__(self, api_key: str):
        self.header = f"Bearer {api_key}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self.header
        yield request


def auth_for(url: str, api_key: str | None, auth: str | httpx.Auth | None, region: str | None) -> httpx.Auth | None:
    """`auth="sigv4"` signs for AWS; an `httpx.Auth` is used as given; else the API key, if any, as a bearer key."""
    if isinstance(auth, httpx.Auth):
        return auth
    if auth == "sigv4":
        return SigV4Auth(SigV4Signer(url, region=region))
    if auth not in (None, "api_key"):
        raise ValueError(f"auth must be 'sigv4', 'api_key', an httpx.Auth or None, not {auth!r}")
    return ApiKeyAuth(api_key) if api_key else None
