"""Building an opensearch-py client from a URL: plain HTTP(S) (basic auth in the URL if any), or
SigV4-signed requests for Amazon OpenSearch Service."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from opensearchpy import OpenSearch, RequestsHttpConnection

from ...domain.errors import DependencyFailed, InvalidInput

TIMEOUT_S = 30


def build_client(url: str, *, region: str = "us-east-1", sigv4: bool = False, service: str = "es",
                 headers: dict[str, str] | None = None, credentials: Any = None) -> OpenSearch:
    """`headers`: sent with every request (a tenant's token); `credentials`: botocore credentials to
    sign with (a tenant's STS session) instead of the process's own."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InvalidInput(f"OpenSearch URL must be http(s)://host[:port], got {url!r}", field="opensearch_url")
    if sigv4 and (parsed.username or parsed.password):
        raise InvalidInput("a SigV4-signed OpenSearch URL carries no user:password", field="opensearch_url")
    options: dict[str, Any] = {
        "hosts": [url],
        "http_compress": True,  # bulk bodies are mostly vectors: gzip roughly halves them
        "timeout": TIMEOUT_S,
        # Reads and id-keyed writes are idempotent, so retrying a timed-out request is safe.
        # 429 is not retried here (that would be immediate): the adapter backs off itself.
        "max_retries": 3,
        "retry_on_timeout": True,
    }
    if headers:
        options["headers"] = headers
    if sigv4:
        options.update(http_auth=_aws4auth(region, service, credentials), connection_class=RequestsHttpConnection,
                       use_ssl=parsed.scheme == "https", verify_certs=True)
    return OpenSearch(**options)


def _aws4auth(region: str, service: str, credentials: Any = None) -> Any:
    import boto3
    from requests_aws4auth import AWS4Auth

    credentials = credentials or boto3.Session().get_credentials()
    if credentials is None:
        raise DependencyFailed("SigV4 signing for OpenSearch needs AWS credentials and none were found",
                               code="index_failed")
    # Refreshable: Lambda and role credentials expire; AWS4Auth re-reads them before they do.
    return AWS4Auth(refreshable_credentials=credentials, region=region, service=service)
